"""The BMC's AccountService: the three standard roles and the one account the sim creates.

Shapes follow DMTF's public-cooling-unit mockup (AccountService, Roles, Accounts). Not modelled:
creating, changing or deleting accounts or roles (POST/PATCH/DELETE answer 405), account lockout,
and privileges: every account that authenticates may read everything, which the read-only service
allows any role to do anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from gpufleet_sim.bmc.payloads import Resource, collection, link, resource, status
from gpufleet_sim.state import State

ACCOUNT_SERVICE = "/redfish/v1/AccountService"
ROLES = f"{ACCOUNT_SERVICE}/Roles"
ACCOUNTS = f"{ACCOUNT_SERVICE}/Accounts"
# The account launch.prepare creates; "1" as on DMTF's mockups and most BMCs.
ADMIN_ACCOUNT_ID = "1"
ADMIN_ROLE = "Administrator"
# The Redfish standard roles and their privileges (DSP0266 "Roles"; DSP8011's privilege registry).
STANDARD_ROLES: dict[str, tuple[str, ...]] = {
    "Administrator": ("Login", "ConfigureManager", "ConfigureUsers", "ConfigureSelf", "ConfigureComponents"),
    "Operator": ("Login", "ConfigureSelf", "ConfigureComponents"),
    "ReadOnly": ("Login", "ConfigureSelf"),
}


def account_service(state: State) -> Resource:
    return resource(
        "#AccountService.v1_18_1.AccountService",
        "AccountService",
        "Account Service",
        ACCOUNT_SERVICE,
        Description="Account Service",
        Status=status(),
        ServiceEnabled=True,
        # Basic auth is accepted on every request (server.Handler._authorised).
        HTTPBasicAuth="Enabled",
        Accounts=link(ACCOUNTS),
        Roles=link(ROLES),
    )


def roles(state: State) -> Resource:
    return collection("RoleCollection", "Roles Collection", ROLES, [f"{ROLES}/{r}" for r in STANDARD_ROLES])


def role(state: State, ident: str) -> Resource:
    return resource(
        "#Role.v1_3_3.Role",
        ident,
        "User Role",
        f"{ROLES}/{ident}",
        Description=f"{ident} User Role",
        # Role.v1_3_3 marks RoleId required, equal to Id (DMTF's Service Validator checks it)
        RoleId=ident,
        IsPredefined=True,
        AssignedPrivileges=list(STANDARD_ROLES[ident]),
        OemPrivileges=[],
    )


def accounts(state: State) -> Resource:
    return collection(
        "ManagerAccountCollection", "Accounts Collection", ACCOUNTS, [f"{ACCOUNTS}/{ADMIN_ACCOUNT_ID}"]
    )


def admin_account(state: State) -> Resource:
    return resource(
        "#ManagerAccount.v1_14_1.ManagerAccount",
        ADMIN_ACCOUNT_ID,
        "User Account",
        f"{ACCOUNTS}/{ADMIN_ACCOUNT_ID}",
        Description="User Account",
        Enabled=True,
        Password=None,  # never readable, as the schema requires
        PasswordChangeRequired=False,
        AccountTypes=["Redfish"],
        UserName=str(state.get("bmc", {}).get("username", "")),
        RoleId=ADMIN_ROLE,
        Locked=False,
        Links={"Role": link(f"{ROLES}/{ADMIN_ROLE}")},
    )


def routes() -> dict[str, Callable[[State], Resource]]:
    """Path -> resource builder for everything under the AccountService."""
    found: dict[str, Callable[[State], Resource]] = {
        ACCOUNT_SERVICE: account_service,
        ROLES: roles,
        ACCOUNTS: accounts,
        f"{ACCOUNTS}/{ADMIN_ACCOUNT_ID}": admin_account,
    }
    for ident in STANDARD_ROLES:
        found[f"{ROLES}/{ident}"] = partial(role, ident=ident)
    return found
