/* The server name a TLS client asks for, read from its first record (the
 * ClientHello) before any byte of it is forwarded: the transparent path
 * checks it against the name the synthetic address stands for. Strict: a
 * ClientHello split over records, extensions that overrun their lengths, a
 * server_name extension twice or with two host names, a name with bytes a
 * host name cannot hold are all refused. No I/O, no allocation. */
#ifndef CAPSULE_NET_SNI_H
#define CAPSULE_NET_SNI_H

#include <stddef.h>
#include <stdint.h>

#define SNI_NAME_MAX 254           /* 253 characters and the NUL */
#define SNI_RECORD_MAX (5 + 16384) /* a record's header and its largest plaintext */

enum sni_result {
  SNI_NEED_MORE, /* the first record is not complete yet */
  SNI_NOT_TLS,   /* the bytes are not a TLS handshake record */
  SNI_NONE,      /* a ClientHello without server_name */
  SNI_FOUND,     /* name holds it, lower case */
  SNI_MALFORMED, /* a handshake record capsule does not accept */
};

/* Looks at data[0..len), the first bytes the client sent. */
enum sni_result sni_parse(const uint8_t *data, size_t len, char name[SNI_NAME_MAX]);

#endif
