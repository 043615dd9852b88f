/* The native client of a simulated node's tool server (gpufleet_sim.toolserver).
 *
 * A fake tool on a node's PATH used to be a Python script that only handed the server its argv and
 * its stdin/stdout/stderr: ~12 ms of CPU per call to start Python, half of what a served call costs,
 * paid ~30 times per node per drift by 32 nodes on the controller's two cores. This does the same in
 * well under a millisecond. Each tool is a copy of this program with a trailer appended (see
 * toolclient.py): the server's socket, the tool's name and the Python client to run instead when the
 * server is not there. The server cannot tell the two clients apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_TRAILER 4096
#define MAX_REQUEST 65536

/* the trailer: "<socket>\0<command>\0<fallback>\0" then its length as 4 little-endian bytes */
static int read_trailer(char *buf, size_t size) {
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    unsigned char len_bytes[4];
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 4 || pread(fd, len_bytes, 4, end - 4) != 4) { close(fd); return -1; }
    uint32_t len = len_bytes[0] | len_bytes[1] << 8 | len_bytes[2] << 16 | (uint32_t)len_bytes[3] << 24;
    if (len == 0 || len >= size || (off_t)len > end - 4) { close(fd); return -1; }
    ssize_t got = pread(fd, buf, len, end - 4 - len);
    close(fd);
    if (got != (ssize_t)len || buf[len - 1] != '\0') return -1;
    buf[len] = '\0';
    return (int)len;
}

int main(int argc, char **argv) {
    static char trailer[MAX_TRAILER + 1];
    int len = read_trailer(trailer, MAX_TRAILER);
    if (len < 0) { fprintf(stderr, "%s: damaged simulated tool (no trailer)\n", argv[0]); return 2; }
    const char *sock_path = trailer;
    const char *command = sock_path + strlen(sock_path) + 1;
    const char *fallback = command + strlen(command) + 1;
    if (command >= trailer + len || fallback >= trailer + len) {
        fprintf(stderr, "%s: damaged simulated tool (short trailer)\n", argv[0]);
        return 2;
    }

    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (s < 0 || strlen(sock_path) >= sizeof(addr.sun_path)) goto local;
    strcpy(addr.sun_path, sock_path);
    if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) != 0) goto local;

    /* the request: command and arguments, NUL-separated (no trailing NUL), as the Python client */
    static char request[MAX_REQUEST];
    size_t used = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = i == 0 ? command : argv[i];
        size_t n = strlen(arg);
        if (used + n + 1 > sizeof(request)) { fprintf(stderr, "%s: arguments too long\n", command); return 2; }
        if (i) request[used++] = '\0';
        memcpy(request + used, arg, n);
        used += n;
    }
    int fds[3] = {0, 1, 2};
    char control[CMSG_SPACE(sizeof(fds))];
    memset(control, 0, sizeof(control));
    struct iovec iov = {.iov_base = request, .iov_len = used};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                         .msg_controllen = sizeof(control)};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
    if (sendmsg(s, &msg, 0) < 0) goto local;

    char answer[32];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(s, answer + got, sizeof(answer) - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
        if (got == sizeof(answer) - 1) break;
    }
    if (got == 0) {
        fprintf(stderr, "%s: the simulated node's tool server failed\n", command);
        return 1;
    }
    answer[got] = '\0';
    if (strcmp(answer, "local") != 0) return atoi(answer);

local:
    /* no server (not started yet, or gone), or a call the server leaves to its caller (systemctl
     * start): the Python client runs the tool itself */
    if (s >= 0) close(s);
    argv[0] = (char *)fallback;
    execv(fallback, argv);
    fprintf(stderr, "%s: cannot run %s: %s\n", command, fallback, strerror(errno));
    return 127;
}
