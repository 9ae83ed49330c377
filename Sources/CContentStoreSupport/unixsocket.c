// Unix-domain socket plumbing for the control socket (Sources/ContentStore/Control): the calls and
// structures differ between Linux and macOS, and sockaddr_un is awkward from Swift.
#define _GNU_SOURCE
#include "CContentStoreSupport.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fill_address(struct sockaddr_un *address, const char *path) {
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    size_t length = strlen(path);
    if (length >= sizeof address->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(address->sun_path, path, length + 1);
    return 0;
}

static int new_socket(void) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

int cs_unix_listen(const char *path, int backlog) {
    struct sockaddr_un address;
    if (fill_address(&address, path) != 0) return -1;
    int fd = new_socket();
    if (fd < 0) return -1;
    // The mode is set before listen(): no peer can connect while the file is still more open.
    if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || chmod(path, 0600) != 0 || listen(fd, backlog) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int cs_unix_connect(const char *path) {
    struct sockaddr_un address;
    if (fill_address(&address, path) != 0) return -1;
    int fd = new_socket();
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int cs_peer_uid(int fd, uint32_t *uid) {
#if defined(__linux__)
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *uid = (uint32_t)credentials.uid;
    return 0;
#else
    uid_t peer;
    gid_t group;
    if (getpeereid(fd, &peer, &group) != 0) return -1;
    *uid = (uint32_t)peer;
    return 0;
#endif
}
