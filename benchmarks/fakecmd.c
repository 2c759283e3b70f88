/*
 * A stand-in for one FreeBSD command inside a benchmark fake host's chroot (benchmarks/fakehosts.py).
 *
 * Installed (hard-linked) as /sbin/sysctl, /usr/bin/uname, /sbin/kldstat ... It answers with what the
 * recording says that exact command line printed: /.fake/NAME ARGS (every '/' of the key as '%')
 * holds "RC MODE\n" and then the recorded output, written the way the real program writes it:
 *   b  stdio, block-buffered on a pipe: one write(2) per 4096 bytes (FreeBSD stdio sizes a pipe's
 *      buffer by st_blksize, a page);
 *   l  one write per line (sh scripts such as freebsd-version: one echo per line);
 *   u  unbuffered stdio (sysctl(8) calls setbuf(stdout, 0)): printf("%s%s", name, ": ") and the
 *      value are separate writes, then the newline: three writes per "name: value" line.
 * The exit status is RC. An unknown command line gets exit 99 and a message on stderr.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(1, p, n);
		if (w <= 0)
			exit(1);
		p += w;
		n -= (size_t)w;
	}
}

int main(int argc, char **argv)
{
	char key[4096], buf[1 << 20];
	const char *name = strrchr(argv[0], '/');
	size_t n, len = 0;
	int fd, rc;
	char mode, *p, *end;

	name = name ? name + 1 : argv[0];
	n = (size_t)snprintf(key, sizeof key, "/.fake/%s", name);
	for (int i = 1; i < argc && n < sizeof key; i++)
		n += (size_t)snprintf(key + n, sizeof key - n, " %s", argv[i]);
	for (p = key + 7; *p; p++)
		if (*p == '/')
			*p = '%';
	fd = open(key, O_RDONLY);
	if (fd < 0) {
		dprintf(2, "fakecmd: no recorded answer for '%s'\n", key + 7);
		return 99;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof buf - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	end = buf + len;
	if (len == sizeof buf || sscanf(buf, "%d %c", &rc, &mode) != 2 || (p = memchr(buf, '\n', len)) == NULL) {
		dprintf(2, "fakecmd: bad answer file '%s'\n", key + 7);
		return 98;
	}
	p++;
	if (mode == 'b') {
		while (p < end) {
			size_t chunk = (size_t)(end - p) < 4096 ? (size_t)(end - p) : 4096;
			put(p, chunk);
			p += chunk;
		}
	} else {
		while (p < end) {
			char *nl = memchr(p, '\n', (size_t)(end - p));
			char *stop = nl ? nl : end;
			char *sep = mode == 'u' ? memchr(p, ':', (size_t)(stop - p)) : NULL;
			if (sep && sep + 1 < stop && sep[1] == ' ') {
				put(p, (size_t)(sep + 2 - p));
				if (stop > sep + 2)
					put(sep + 2, (size_t)(stop - sep - 2));
				if (nl)
					put("\n", 1);
			} else if (mode == 'u' && nl) {
				if (stop > p)
					put(p, (size_t)(stop - p));
				put("\n", 1);
			} else {
				put(p, (size_t)((nl ? nl + 1 : end) - p));
			}
			p = nl ? nl + 1 : end;
		}
	}
	return rc;
}
