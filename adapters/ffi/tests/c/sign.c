/*
 * Signing through the C ABI: a public key, BIP-340 vector 0, a NIP-42 answer sized with a
 * first call that is too small, an event with tags that tether_verify_event accepts, and
 * adversarial calls (null pointers, a zero key, tags that are not tags, a kind too large).
 * Run plain, under valgrind memcheck and with -fsanitize=address,undefined. Exit 0 only if
 * every check passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tether.h"

static int failures = 0;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                   \
            failures++;                                                       \
        }                                                                     \
    } while (0)

#define CODE(call, want)                                                          \
    do {                                                                          \
        int32_t got_ = (call);                                                    \
        if (got_ != (want)) {                                                     \
            fprintf(stderr, "%s:%d: %s returned %d, want %d\n", __FILE__, __LINE__, \
                    #call, (int)got_, (int)(want));                               \
            failures++;                                                           \
        }                                                                         \
    } while (0)

static void hex(const uint8_t *bytes, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Whether `needle` occurs in the `n` bytes at `hay` (C11 has no memmem). */
static int contains(const uint8_t *hay, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        if (memcmp(hay + i, needle, m) == 0) {
            return 1;
        }
    }
    return 0;
}

#define TEXT(s) (const uint8_t *)(s), strlen(s)

int main(void) {
    uint8_t key[32] = {0};
    key[31] = 3; /* BIP-340 vector 0 */
    char text[129];

    uint8_t pubkey[32];
    CODE(tether_public_key(key, pubkey), TETHER_OK);
    hex(pubkey, 32, text);
    CHECK(strcmp(text, "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9") == 0);

    uint8_t zero[32] = {0};
    uint8_t sig[64];
    CODE(tether_sign_schnorr(key, zero, NULL, sig), TETHER_OK);
    hex(sig, 64, text);
    CHECK(strcmp(text, "e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca8215"
                       "25f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0") == 0);

    /* NIP-42: ask for the length, then sign into a buffer of exactly that size. */
    size_t len = 0;
    CODE(tether_sign_auth(key, TEXT("wss://relay.example.com"), TEXT("challenge-1"), 1700000001,
                          NULL, NULL, &len),
         TETHER_ERR_BUFFER_TOO_SMALL);
    CHECK(len > 300 && len < 1000);
    uint8_t *auth = malloc(len);
    CHECK(auth != NULL);
    size_t auth_len = len;
    uint8_t aux[32];
    memset(aux, 0x5a, sizeof aux);
    CODE(tether_sign_auth(key, TEXT("wss://relay.example.com"), TEXT("challenge-1"), 1700000001,
                          aux, auth, &auth_len),
         TETHER_OK);
    CHECK(auth_len == len);
    CODE(tether_verify_event(auth, auth_len), TETHER_OK);
    CHECK(contains(auth, auth_len, "\"kind\":22242"));
    CHECK(contains(auth, auth_len,
                   "[[\"relay\",\"wss://relay.example.com\"],[\"challenge\",\"challenge-1\"]]"));
    /* A changed character of the signature: the library's verifier refuses it. */
    auth[auth_len - 3] ^= 1;
    CHECK(tether_verify_event(auth, auth_len) != TETHER_OK);
    free(auth);

    /* An event to publish. */
    uint8_t event[2048];
    len = sizeof event;
    CODE(tether_sign_event(key, 1700000002, 1, TEXT("[[\"t\",\"tether\"],[\"p\",\"00\"]]"),
                           TEXT("hello \"world\"\n"), NULL, event, &len),
         TETHER_OK);
    CODE(tether_verify_event(event, len), TETHER_OK);
    CHECK(memcmp(event, "{\"id\":\"", 7) == 0);

    /* Misuse: codes, never a crash. */
    len = sizeof event;
    CODE(tether_public_key(NULL, pubkey), TETHER_ERR_NULL);
    CODE(tether_public_key(key, NULL), TETHER_ERR_NULL);
    CODE(tether_public_key(zero, pubkey), TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_sign_schnorr(key, NULL, NULL, sig), TETHER_ERR_NULL);
    CODE(tether_sign_event(NULL, 1, 1, TEXT("[]"), TEXT(""), NULL, event, &len), TETHER_ERR_NULL);
    CODE(tether_sign_event(key, 1, 1, TEXT("[]"), TEXT(""), NULL, event, NULL), TETHER_ERR_NULL);
    CODE(tether_sign_event(key, 1, 1, NULL, 2, TEXT(""), NULL, event, &len), TETHER_ERR_NULL);
    CODE(tether_sign_event(zero, 1, 1, TEXT("[]"), TEXT(""), NULL, event, &len),
         TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_sign_event(key, 1, 70000, TEXT("[]"), TEXT(""), NULL, event, &len),
         TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_sign_event(key, 1, 1, TEXT("[[1]]"), TEXT(""), NULL, event, &len),
         TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_sign_event(key, 1, 1, TEXT("[]"), (const uint8_t *)"\xff", 1, NULL, event, &len),
         TETHER_ERR_UTF8);
    len = 10;
    CODE(tether_sign_event(key, 1, 1, TEXT("[]"), TEXT(""), NULL, event, &len),
         TETHER_ERR_BUFFER_TOO_SMALL);
    CHECK(len > 10);
    CODE(tether_sign_auth(key, NULL, 3, TEXT("c"), 1, NULL, event, &len), TETHER_ERR_NULL);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("sign: every check passed\n");
    return 0;
}
