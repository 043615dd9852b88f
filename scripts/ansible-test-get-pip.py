"""Stand-in for the get-pip.py that ansible-test downloads (gpufleet: ansible-test pip bootstrap).

ansible-test creates each sanity test's virtual environment without pip, then runs
get-pip.py from ci-files.testing.ansible.com to put pip into it. That host is not
reachable from our build machines (only PyPI is), so scripts/sanity.sh copies this file
where ansible-test caches the download. It does what get-pip.py does with the pip that
this Python ships (ensurepip, no network), then installs the pip ansible-test asked for
from PyPI: `python get_pip_X.py [pip options] pip==X [--no-setuptools] [--no-wheel]`.
"""

import subprocess
import sys


def main() -> int:
    # get-pip.py options that mean "do not also install setuptools/wheel"; pip has no such flags.
    args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
    subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True)
    return subprocess.run([sys.executable, "-m", "pip", "install", *args], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
