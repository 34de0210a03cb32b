/*
 * Drives a tether pool through the C ABI with scripted frames from two relays and checks
 * every output exactly: keyed transmits, cross-relay dedup and one honest outcome, a
 * publish's per-relay answers, NIP-11 documents, per-relay counters, verification handed to
 * the host (tether_verify_event) and its verdicts, a checkpoint and its restore, and the
 * ABI's error codes for adversarial calls (null pointers, zero-capacity buffers, unknown
 * relays, stale and never-handed-out epochs, unknown and repeated verdicts, a 100 MB frame),
 * and routing by people (the URL of a relay the pool chose, and its route reports).
 *
 * Built with -Wall -Wextra -Werror by tests/c_abi.rs, run plain, under valgrind memcheck and
 * with -fsanitize=address,undefined. Exit 0 only if every check passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tether.h"

static int failures = 0;
static uint8_t buf[8192];

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

typedef int32_t (*poll_fn)(TetherPool *, uint8_t *, size_t *);

/* The next output from `poll` must be exactly `want`. */
static void expect(int line, TetherPool *pool, poll_fn poll, const char *what,
                   const char *want) {
    size_t len = sizeof buf;
    int32_t code = poll(pool, buf, &len);
    if (code != TETHER_OK) {
        fprintf(stderr, "pool_session.c:%d: %s: code %d, want %s\n", line, what, (int)code,
                want);
        failures++;
        return;
    }
    if (len != strlen(want) || memcmp(buf, want, len) != 0) {
        fprintf(stderr, "pool_session.c:%d: %s:\n  got  %.*s\n  want %s\n", line, what,
                (int)len, (const char *)buf, want);
        failures++;
    }
}

#define TRANSMIT(pool, want) expect(__LINE__, pool, tether_pool_poll_transmit, "transmit", want)
#define EVENT(pool, want) expect(__LINE__, pool, tether_pool_poll_event, "event", want)
#define VERIFY(pool, want) expect(__LINE__, pool, tether_pool_poll_verify, "verify", want)

/* Nothing is left to drain. */
static void drained(int line, TetherPool *pool) {
    poll_fn polls[3] = {tether_pool_poll_transmit, tether_pool_poll_event,
                        tether_pool_poll_verify};
    const char *names[3] = {"transmit", "event", "verification"};
    for (int i = 0; i < 3; i++) {
        size_t len = sizeof buf;
        int32_t code = polls[i](pool, buf, &len);
        if (code != TETHER_DONE) {
            fprintf(stderr, "pool_session.c:%d: an extra %s (%d): %.*s\n", line, names[i],
                    (int)code, (int)len, (const char *)buf);
            failures++;
        }
    }
}
#define DRAINED(pool) drained(__LINE__, pool)

static const uint8_t *text(const char *s) { return (const uint8_t *)s; }

/* The shared buffer starts with `prefix`. */
static int starts(const char *prefix) { return memcmp(buf, prefix, strlen(prefix)) == 0; }

static int32_t frame(TetherPool *pool, uint64_t now, uint32_t relay, uint64_t epoch,
                     const char *s) {
    return tether_pool_handle_frame(pool, now, relay, epoch, text(s), strlen(s));
}

static int32_t subscribe(TetherPool *pool, uint64_t now, const char *filters, uint64_t *sub) {
    return tether_pool_subscribe(pool, now, text(filters), strlen(filters), sub);
}

/* The last error of `pool` is exactly `want`. */
static void last_error(int line, TetherPool *pool, const char *want) {
    size_t len = sizeof buf;
    CODE(tether_pool_last_error(pool, buf, &len), TETHER_OK);
    if (len != strlen(want) || memcmp(buf, want, len) != 0) {
        fprintf(stderr, "pool_session.c:%d: last error:\n  got  %.*s\n  want %s\n", line,
                (int)len, (const char *)buf, want);
        failures++;
    }
}
#define LAST_ERROR(pool, want) last_error(__LINE__, pool, want)

#define ID1 "1111111111111111111111111111111111111111111111111111111111111111"
#define ID2 "2222222222222222222222222222222222222222222222222222222222222222"
/* EV(ID2) as it appears inside a transmit's "text" string. */
#define EV_ESCAPED                                                                         \
    "{\\\"id\\\":\\\"" ID2 "\\\",\\\"pubkey\\\":\\\"" ID2 "\\\",\\\"created_at\\\":1700000000," \
    "\\\"kind\\\":1,\\\"tags\\\":[],\\\"content\\\":\\\"hi\\\",\\\"sig\\\":\\\"s\\\"}"

#define EV(id)                                                                       \
    "{\"id\":\"" id "\",\"pubkey\":\"" ID2 "\",\"created_at\":1700000000,\"kind\":1," \
    "\"tags\":[],\"content\":\"hi\",\"sig\":\"s\"}"

static TetherPool *new_pool(uint32_t verify) {
    TetherPoolConfig config;
    config.struct_size = sizeof config;
    CODE(tether_pool_config_default(&config), TETHER_OK);
    CHECK(config.eose_deadline_ms == 10000 && config.max_relays == 10000);
    config.seed = 7;
    config.verify = verify;
    TetherPool *pool = NULL;
    CODE(tether_pool_new(&config, &pool), TETHER_OK);
    CHECK(pool != NULL);
    return pool;
}

static void config_misuse(void) {
    TetherPoolConfig config;
    config.struct_size = sizeof config;
    CODE(tether_pool_config_default(&config), TETHER_OK);
    TetherPool *pool = NULL;
    config.verify = 2;
    CODE(tether_pool_new(&config, &pool), TETHER_ERR_INVALID_ARGUMENT);
    CHECK(pool == NULL);
    config.verify = 0;
    config.dedup_capacity = 0;
    CODE(tether_pool_new(&config, &pool), TETHER_ERR_INVALID_ARGUMENT);
    config.struct_size = 4;
    CODE(tether_pool_config_default(&config), TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_pool_new(NULL, &pool), TETHER_ERR_NULL);
    CHECK(pool == NULL);
    size_t len = sizeof buf;
    uint64_t at = 0;
    CODE(tether_pool_poll_event(NULL, buf, &len), TETHER_ERR_NULL);
    CODE(tether_pool_poll_timeout(NULL, &at), TETHER_ERR_NULL);
    tether_pool_free(NULL);
}

/* Two relays, one subscription: each event once, one outcome; then a publish, NIP-11,
 * counters, misuse, a removal, and a checkpoint that restores. */
static void two_relays(void) {
    TetherPool *pool = new_pool(0);
    uint64_t at = 0;
    CODE(tether_pool_poll_timeout(pool, &at), TETHER_DONE);
    uint32_t a = 9, b = 9;
    CODE(tether_pool_add_relay(pool, 0, &a), TETHER_OK);
    CODE(tether_pool_add_relay(pool, 0, &b), TETHER_OK);
    CHECK(a == 0 && b == 1);
    /* The application's relays are dialed anywhere; only routed ones may be public only. */
    uint32_t public_only = 9;
    CODE(tether_pool_public_only(pool, a, &public_only), TETHER_OK);
    CHECK(public_only == 0);
    CODE(tether_pool_public_only(pool, a, NULL), TETHER_ERR_NULL);
    uint64_t sub = 9;
    CODE(subscribe(pool, 0, "[{\"kinds\":[1]}]", &sub), TETHER_OK);
    CHECK(sub == 1); /* subscription ids start at 1 */
    TRANSMIT(pool, "{\"type\":\"open\",\"relay\":0,\"epoch\":1}");
    TRANSMIT(pool, "{\"type\":\"open\",\"relay\":1,\"epoch\":1}");
    DRAINED(pool);
    CODE(tether_pool_poll_timeout(pool, &at), TETHER_OK);
    CHECK(at == 10000); /* the outcome deadline (the connect timeout is later) */

    CODE(tether_pool_handle_open(pool, 10, a, 1), TETHER_OK);
    CODE(tether_pool_handle_open(pool, 10, b, 1), TETHER_OK);
    TRANSMIT(pool, "{\"type\":\"send\",\"relay\":0,\"text\":\"[\\\"REQ\\\",\\\"0:1\\\","
                   "{\\\"kinds\\\":[1]}]\",\"carries\":{\"req\":0}}");
    TRANSMIT(pool, "{\"type\":\"send\",\"relay\":1,\"text\":\"[\\\"REQ\\\",\\\"0:1\\\","
                   "{\\\"kinds\\\":[1]}]\",\"carries\":{\"req\":0}}");
    EVENT(pool, "{\"type\":\"connected\",\"relay\":0}");
    EVENT(pool, "{\"type\":\"connected\",\"relay\":1}");
    DRAINED(pool);

    /* The same event from both relays is delivered once, from the first. */
    CODE(frame(pool, 20, b, 1, "[\"EVENT\",\"0:1\"," EV(ID1) "]"), TETHER_OK);
    CODE(frame(pool, 21, a, 1, "[\"EVENT\",\"0:1\"," EV(ID1) "]"), TETHER_OK);
    CODE(frame(pool, 22, a, 1, "[\"EOSE\",\"0:1\"]"), TETHER_OK);
    EVENT(pool, "{\"type\":\"event\",\"sub\":1,\"relay\":1,\"id\":\"" ID1 "\",\"event\":" EV(ID1) "}");
    EVENT(pool, "{\"type\":\"eose\",\"sub\":1,\"relay\":0}");
    DRAINED(pool);
    /* A zero-capacity buffer is told the size and keeps the item. */
    CODE(frame(pool, 23, b, 1, "[\"EOSE\",\"0:1\"]"), TETHER_OK);
    size_t len = 0;
    CODE(tether_pool_poll_event(pool, NULL, &len), TETHER_ERR_BUFFER_TOO_SMALL);
    CHECK(len == strlen("{\"type\":\"eose\",\"sub\":1,\"relay\":1}"));
    CODE(tether_pool_poll_event(pool, buf, NULL), TETHER_ERR_NULL);
    CODE(tether_pool_poll_timeout(pool, &at), TETHER_OK);
    CHECK(at == 23); /* output is held: poll it now */
    EVENT(pool, "{\"type\":\"eose\",\"sub\":1,\"relay\":1}");
    EVENT(pool, "{\"type\":\"complete\",\"sub\":1,\"outcome\":\"complete\",\"missing\":[]}");
    DRAINED(pool);
    len = sizeof buf;
    CODE(tether_pool_relay_stats(pool, a, buf, &len), TETHER_OK);
    CHECK(len == strlen("{\"duplicates\":1,\"conflicts\":0,\"invalid\":0,\"unverified_dropped\":0,\"unmatched\":0}"));
    CHECK(starts("{\"duplicates\":1,"));
    len = sizeof buf;
    CODE(tether_pool_relay_stats(pool, 7, buf, &len), TETHER_ERR_UNKNOWN_ID);
    LAST_ERROR(pool, "unknown relay r7");

    /* Socket input misuse: unknown relays, epochs never handed out (0 and 2), bad UTF-8. */
    CODE(frame(pool, 30, 7, 1, "[]"), TETHER_ERR_UNKNOWN_ID);
    CODE(frame(pool, 30, a, 0, "[]"), TETHER_ERR_UNKNOWN_ID);
    CODE(frame(pool, 30, a, 2, "[]"), TETHER_ERR_UNKNOWN_ID);
    LAST_ERROR(pool, "epoch 2 was never opened");
    CODE(tether_pool_handle_open(pool, 30, a, 1), TETHER_ERR_WRONG_STATE);
    CODE(tether_pool_handle_close(pool, 30, a, 1, 99, -1), TETHER_ERR_INVALID_ARGUMENT);
    const uint8_t bad_utf8[] = {'[', 0xff, ']'};
    CODE(tether_pool_handle_frame(pool, 30, a, 1, bad_utf8, sizeof bad_utf8), TETHER_ERR_UTF8);
    CODE(tether_pool_handle_frame(pool, 30, a, 1, NULL, 4), TETHER_ERR_NULL);
    CODE(subscribe(pool, 30, "[]", &sub), TETHER_ERR_INVALID_ARGUMENT);
    CODE(subscribe(pool, 30, "[{\"kinds\":[1]}]", NULL), TETHER_ERR_NULL);
    CODE(tether_pool_unsubscribe(pool, 30, 99), TETHER_ERR_UNKNOWN_ID);
    CODE(tether_pool_remove_relay(pool, 30, 7), TETHER_ERR_UNKNOWN_ID);
    const char *routing = "[{\"relay\":7,\"filters\":[{}]}]";
    CODE(tether_pool_subscribe_routed(pool, 30, text(routing), strlen(routing), &sub),
         TETHER_ERR_UNKNOWN_ID);
    routing = "[{\"relay\":0}]";
    CODE(tether_pool_subscribe_routed(pool, 30, text(routing), strlen(routing), &sub),
         TETHER_ERR_INVALID_ARGUMENT);
    /* A peer's malformed frame is an event, not an error code. */
    CODE(frame(pool, 31, a, 1, "not json"), TETHER_OK);
    len = sizeof buf;
    CODE(tether_pool_poll_event(pool, buf, &len), TETHER_OK);
    CHECK(starts("{\"type\":\"peer_error\",\"relay\":0,"));
    DRAINED(pool);

    /* A 100 MB frame: over the 4 MiB limit, it is a peer error and dropped undecoded. */
    size_t huge = 100u * 1024 * 1024;
    uint8_t *big = malloc(huge);
    CHECK(big != NULL);
    if (big != NULL) {
        memset(big, 'x', huge);
        CODE(tether_pool_handle_frame(pool, 32, a, 1, big, huge), TETHER_OK);
        free(big);
    }
    EVENT(pool, "{\"type\":\"peer_error\",\"relay\":0,\"kind\":\"too_large\","
                "\"excerpt\":\"frame of 104857600 bytes exceeds the 4194304-byte limit\"}");
    DRAINED(pool);

    /* Publish to relay b only: its OK is the outcome. */
    const char *ev = EV(ID2);
    uint8_t id[32];
    uint32_t only_b[1] = {1};
    CODE(tether_pool_publish(pool, 40, text(ev), strlen(ev), only_b, 1, id), TETHER_OK);
    CHECK(id[0] == 0x22 && id[31] == 0x22);
    CODE(tether_pool_publish(pool, 40, text(ev), strlen(ev), only_b, 1, id), TETHER_ERR_LIMIT);
    uint32_t unknown[1] = {7};
    CODE(tether_pool_publish(pool, 40, text(ev), strlen(ev), unknown, 1, NULL),
         TETHER_ERR_UNKNOWN_ID);
    TRANSMIT(pool, "{\"type\":\"send\",\"relay\":1,\"text\":\"[\\\"EVENT\\\"," EV_ESCAPED "]\","
                   "\"carries\":{\"event\":\"" ID2 "\"}}");
    DRAINED(pool);
    CODE(frame(pool, 41, b, 1, "[\"OK\",\"" ID2 "\",true,\"\"]"), TETHER_OK);
    EVENT(pool, "{\"type\":\"published\",\"relay\":1,\"id\":\"" ID2 "\"}");
    EVENT(pool, "{\"type\":\"publish_done\",\"id\":\"" ID2 "\",\"accepted\":[1],\"rejected\":[],\"pending\":[],"
                "\"urls\":[]}");
    DRAINED(pool);

    /* NIP-11: a document's limits apply; an unreadable one changes nothing. */
    const char *doc = "{\"limitation\":{\"max_subscriptions\":20,\"max_limit\":500,"
                      "\"auth_required\":false},\"supported_nips\":[1,11,77]}";
    len = 4;
    CODE(tether_pool_apply_relay_info(pool, 50, b, text(doc), strlen(doc), buf, &len),
         TETHER_ERR_BUFFER_TOO_SMALL);
    CHECK(len == TETHER_APPLIED_MAX);
    len = sizeof buf;
    CODE(tether_pool_apply_relay_info(pool, 50, b, text(doc), strlen(doc), buf, &len), TETHER_OK);
    const char *applied = "{\"subscription_limit\":20,\"limit_is_declared\":true,"
                          "\"max_message_length\":null,\"max_subid_length\":null,"
                          "\"auth_first\":false,\"max_limit\":500}";
    CHECK(len == strlen(applied) && memcmp(buf, applied, len) == 0);
    EVENT(pool, "{\"type\":\"subscription_limit\",\"relay\":1,\"max\":20}");
    DRAINED(pool);
    len = sizeof buf;
    CODE(tether_pool_apply_relay_info(pool, 50, b, text("<html>"), 6, buf, &len),
         TETHER_INFO_UNREADABLE);
    CHECK(starts("{\"error\":\"relay information document is not JSON"));
    len = sizeof buf;
    CODE(tether_pool_apply_relay_info(pool, 50, 7, text(doc), strlen(doc), buf, &len),
         TETHER_ERR_UNKNOWN_ID);
    DRAINED(pool);

    /* A checkpoint restores into a pool with the same relays and subscription. */
    len = 0;
    CODE(tether_pool_checkpoint(pool, NULL, &len), TETHER_ERR_BUFFER_TOO_SMALL);
    uint8_t *saved = malloc(len);
    CHECK(saved != NULL);
    size_t saved_len = len;
    CODE(tether_pool_checkpoint(pool, saved, &saved_len), TETHER_OK);
    TetherPoolConfig config;
    config.struct_size = sizeof config;
    CODE(tether_pool_config_default(&config), TETHER_OK);
    TetherPool *restored = NULL;
    CODE(tether_pool_restore(&config, saved, saved_len, 0, 1700000100, &restored, NULL, NULL),
         TETHER_OK);
    CHECK(restored != NULL);
    TRANSMIT(restored, "{\"type\":\"open\",\"relay\":0,\"epoch\":1}");
    TRANSMIT(restored, "{\"type\":\"open\",\"relay\":1,\"epoch\":1}");
    CODE(tether_pool_unsubscribe(restored, 0, sub), TETHER_OK);
    tether_pool_free(restored);
    size_t why_len = sizeof buf;
    CODE(tether_pool_restore(&config, text("{}"), 2, 0, 0, &restored, buf, &why_len),
         TETHER_ERR_CHECKPOINT);
    CHECK(why_len > 0);
    free(saved);

    /* Removing a relay closes its socket, and the host hears it closed on request. */
    CODE(tether_pool_remove_relay(pool, 60, b), TETHER_OK);
    TRANSMIT(pool, "{\"type\":\"close\",\"relay\":1,\"epoch\":1}");
    EVENT(pool, "{\"type\":\"disconnected\",\"relay\":1,\"reconnect_in_ms\":null,"
                "\"why\":\"requested\"}");
    DRAINED(pool);
    tether_pool_free(pool);
}

/* Verification is the host's: checks come out, verdicts go in, in any order. */
static void verification(void) {
    TetherPool *pool = new_pool(1);
    uint32_t a = 9;
    uint64_t sub = 9;
    CODE(tether_pool_add_relay(pool, 0, &a), TETHER_OK);
    CODE(subscribe(pool, 0, "[{\"kinds\":[1]}]", &sub), TETHER_OK);
    CODE(tether_pool_handle_open(pool, 0, a, 1), TETHER_OK);
    size_t len;
    do {
        len = sizeof buf;
    } while (tether_pool_poll_transmit(pool, buf, &len) == TETHER_OK);
    do {
        len = sizeof buf;
    } while (tether_pool_poll_event(pool, buf, &len) == TETHER_OK);

    CODE(frame(pool, 10, a, 1, "[\"EVENT\",\"0:1\"," EV(ID1) "]"), TETHER_OK);
    CODE(frame(pool, 11, a, 1, "[\"EVENT\",\"0:1\"," EV(ID2) "]"), TETHER_OK);
    CODE(frame(pool, 12, a, 1, "[\"EOSE\",\"0:1\"]"), TETHER_OK);
    VERIFY(pool, "{\"ticket\":1,\"relay\":0,\"id\":\"" ID1 "\",\"event\":" EV(ID1) "}");
    VERIFY(pool, "{\"ticket\":2,\"relay\":0,\"id\":\"" ID2 "\",\"event\":" EV(ID2) "}");
    DRAINED(pool); /* everything of the subscription waits for the verdicts */

    /* The id is not the hash of the event: tether_verify_event says so. */
    const char *ev1 = EV(ID1);
    int32_t verdict = tether_verify_event(text(ev1), strlen(ev1));
    CODE(verdict, TETHER_VERIFY_BAD_ID);
    /* The same check for a batch, in one call; each slot gets its own verdict. */
    const uint8_t *batch[3] = {text(ev1), text("{}"), NULL};
    size_t lens[3] = {strlen(ev1), 2, 4};
    int32_t verdicts[3] = {0, 0, 0};
    CODE(tether_verify_events(batch, lens, 3, verdicts), TETHER_OK);
    CHECK(verdicts[0] == TETHER_VERIFY_BAD_ID && verdicts[1] == TETHER_VERIFY_MALFORMED &&
          verdicts[2] == TETHER_ERR_NULL);
    CODE(tether_verify_events(batch, NULL, 3, verdicts), TETHER_ERR_NULL);
    CODE(tether_pool_handle_verified(pool, 20, 2, TETHER_OK, NULL, 0), TETHER_OK);
    DRAINED(pool); /* ticket 2 is genuine, but ticket 1 comes first */
    CODE(tether_pool_handle_verified(pool, 21, 1, verdict, NULL, 0), TETHER_OK);
    EVENT(pool, "{\"type\":\"invalid\",\"sub\":1,\"relay\":0,\"id\":\"" ID1 "\","
                "\"reason\":\"id is not the hash of the event\"}");
    EVENT(pool, "{\"type\":\"event\",\"sub\":1,\"relay\":0,\"id\":\"" ID2 "\",\"event\":" EV(ID2) "}");
    EVENT(pool, "{\"type\":\"eose\",\"sub\":1,\"relay\":0}");
    EVENT(pool, "{\"type\":\"complete\",\"sub\":1,\"outcome\":\"complete\",\"missing\":[]}");
    DRAINED(pool);
    /* A verdict twice, for a ticket never handed out, or that is no verdict. */
    CODE(tether_pool_handle_verified(pool, 22, 1, TETHER_OK, NULL, 0), TETHER_ERR_UNKNOWN_ID);
    CODE(tether_pool_handle_verified(pool, 22, 99, TETHER_OK, NULL, 0), TETHER_ERR_UNKNOWN_ID);
    LAST_ERROR(pool, "no verification 99 is awaited");
    CODE(tether_pool_handle_verified(pool, 22, 2, 42, NULL, 0), TETHER_ERR_INVALID_ARGUMENT);
    /* A host's own reason is carried verbatim. */
    CODE(frame(pool, 30, a, 1, "[\"EVENT\",\"0:1\"," EV("3333333333333333333333333333333333333333333333333333333333333333") "]"), TETHER_OK);
    len = sizeof buf;
    CODE(tether_pool_poll_verify(pool, buf, &len), TETHER_OK);
    const char *why = "revoked key";
    CODE(tether_pool_handle_verified(pool, 31, 3, TETHER_VERIFY_BAD_SIGNATURE, text(why),
                                     strlen(why)),
         TETHER_OK);
    len = sizeof buf;
    CODE(tether_pool_poll_event(pool, buf, &len), TETHER_OK);
    CHECK(strstr((const char *)buf, "\"reason\":\"revoked key\"") != NULL);
    len = sizeof buf;
    CODE(tether_pool_relay_stats(pool, a, buf, &len), TETHER_OK);
    CHECK(len == strlen("{\"duplicates\":0,\"conflicts\":0,\"invalid\":2,\"unverified_dropped\":0,\"unmatched\":0}"));
    DRAINED(pool);
    tether_pool_free(pool);
}

/* Routing by people: the pool opens the indexer it was given, at its URL, asks it for the
 * people's relay lists, opens the relay a list names (its open transmit names the URL to
 * dial), asks it for the feed, and reports each route. A bad indexer list is refused. */
static void outbox(void) {
    TetherPoolConfig config;
    config.struct_size = sizeof config;
    CODE(tether_pool_config_default(&config), TETHER_OK);
    CHECK(config.outbox_max_relays == 20 && config.outbox_redundancy == 2);
    CHECK(config.outbox_indexers == NULL);
    TetherPool *pool = NULL;
    config.outbox_indexers = "[\"http://127.0.0.1:7001\"]";
    CODE(tether_pool_new(&config, &pool), TETHER_ERR_INVALID_ARGUMENT);
    config.outbox_indexers = "[\"ws://127.0.0.1:7001\"]";
    CODE(tether_pool_new(&config, &pool), TETHER_OK);
    uint64_t sub = 9;
    const char *nobody = "{\"kinds\":[1]}";
    CODE(tether_pool_subscribe_outbox(pool, 0, text(nobody), strlen(nobody), &sub),
         TETHER_ERR_INVALID_ARGUMENT);
    const char *feed = "{\"kinds\":[1],\"authors\":[\"" ID2 "\"]}";
    CODE(tether_pool_subscribe_outbox(pool, 0, text(feed), strlen(feed), &sub), TETHER_OK);
    CHECK(sub == 1);
    TRANSMIT(pool, "{\"type\":\"open\",\"relay\":0,\"epoch\":1,\"url\":\"ws://127.0.0.1:7001\"}");
    EVENT(pool, "{\"type\":\"routed\",\"sub\":1,\"relays\":[],\"covered\":[],"
                "\"fallback_only\":[],\"uncovered\":[\"" ID2 "\"]}");
    DRAINED(pool);
    CODE(tether_pool_handle_open(pool, 100, 0, 1), TETHER_OK);
    TRANSMIT(pool, "{\"type\":\"send\",\"relay\":0,\"text\":\"[\\\"REQ\\\",\\\"0:1\\\","
                   "{\\\"authors\\\":[\\\"" ID2 "\\\"],\\\"kinds\\\":[10002,10050]}]\","
                   "\"carries\":{\"req\":0}}");
    EVENT(pool, "{\"type\":\"connected\",\"relay\":0}");
    DRAINED(pool);
    CODE(frame(pool, 200, 0, 1,
               "[\"EVENT\",\"0:1\",{\"id\":\"" ID1 "\",\"pubkey\":\"" ID2 "\","
               "\"created_at\":1700000000,\"kind\":10002,"
               "\"tags\":[[\"r\",\"ws://127.0.0.1:7002\"]],\"content\":\"\",\"sig\":\"s\"}]"),
         TETHER_OK);
    CODE(frame(pool, 200, 0, 1, "[\"EOSE\",\"0:1\"]"), TETHER_OK);
    /* A relay list is always checked: the host's verdict (valid, here) lets it route. */
    VERIFY(pool, "{\"ticket\":1,\"relay\":0,\"id\":\"" ID1 "\",\"event\":{\"id\":\"" ID1 "\","
                 "\"pubkey\":\"" ID2 "\",\"created_at\":1700000000,\"kind\":10002,"
                 "\"tags\":[[\"r\",\"ws://127.0.0.1:7002\"]],\"content\":\"\",\"sig\":\"s\"}}");
    CODE(tether_pool_handle_verified(pool, 200, 1, TETHER_OK, NULL, 0), TETHER_OK);
    DRAINED(pool);
    /* The list routes the author within the pool's reroute delay (1 s). */
    uint64_t at = 0;
    CODE(tether_pool_poll_timeout(pool, &at), TETHER_OK);
    CHECK(at == 1200);
    CODE(tether_pool_handle_timeout(pool, 1200), TETHER_OK);
    TRANSMIT(pool, "{\"type\":\"open\",\"relay\":1,\"epoch\":1,\"url\":\"ws://127.0.0.1:7002\"}");
    EVENT(pool, "{\"type\":\"routed\",\"sub\":1,"
                "\"relays\":[\"ws://127.0.0.1:7001\",\"ws://127.0.0.1:7002\"],"
                "\"covered\":[{\"author\":\"" ID2 "\",\"relays\":1}],"
                "\"fallback_only\":[],\"uncovered\":[]}");
    DRAINED(pool);
    CODE(tether_pool_handle_open(pool, 1300, 1, 1), TETHER_OK);
    TRANSMIT(pool, "{\"type\":\"send\",\"relay\":1,\"text\":\"[\\\"REQ\\\",\\\"0:1\\\","
                   "{\\\"authors\\\":[\\\"" ID2 "\\\"],\\\"kinds\\\":[1]}]\","
                   "\"carries\":{\"req\":0}}");
    EVENT(pool, "{\"type\":\"connected\",\"relay\":1}");
    DRAINED(pool);
    CODE(frame(pool, 1400, 1, 1, "[\"EVENT\",\"0:1\"," EV(ID2) "]"), TETHER_OK);
    CODE(frame(pool, 1400, 1, 1, "[\"EOSE\",\"0:1\"]"), TETHER_OK);
    EVENT(pool, "{\"type\":\"event\",\"sub\":1,\"relay\":1,\"id\":\"" ID2 "\",\"event\":" EV(ID2) "}");
    EVENT(pool, "{\"type\":\"eose\",\"sub\":1,\"relay\":1}");
    EVENT(pool, "{\"type\":\"complete\",\"sub\":1,\"outcome\":\"complete\",\"missing\":[]}");
    DRAINED(pool);
    /* A publish by outbox goes to the author's write relay, which is open already. */
    uint8_t id[32];
    CODE(tether_pool_publish_outbox(pool, 1500, text("{}"), 2, id), TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_pool_publish_outbox(pool, 1500, text(EV(ID1)), strlen(EV(ID1)), id), TETHER_OK);
    CHECK(id[0] == 0x11 && id[31] == 0x11);
    TRANSMIT(pool, "{\"type\":\"send\",\"relay\":1,\"text\":\"[\\\"EVENT\\\","
                   "{\\\"id\\\":\\\"" ID1 "\\\",\\\"pubkey\\\":\\\"" ID2 "\\\","
                   "\\\"created_at\\\":1700000000,\\\"kind\\\":1,\\\"tags\\\":[],"
                   "\\\"content\\\":\\\"hi\\\",\\\"sig\\\":\\\"s\\\"}]\","
                   "\"carries\":{\"event\":\"" ID1 "\"}}");
    DRAINED(pool);
    CODE(frame(pool, 1600, 1, 1, "[\"OK\",\"" ID1 "\",true,\"\"]"), TETHER_OK);
    EVENT(pool, "{\"type\":\"published\",\"relay\":1,\"id\":\"" ID1 "\"}");
    /* The routed relay by URL: its id names nothing once routing lets it go. */
    EVENT(pool, "{\"type\":\"publish_done\",\"id\":\"" ID1 "\",\"accepted\":[1],"
                "\"rejected\":[],\"pending\":[],\"urls\":[\"ws://127.0.0.1:7002\"]}");
    DRAINED(pool);
    const char *list = "{\"kind\":1}";
    CODE(tether_pool_handle_relay_list(pool, 1500, text(list), strlen(list)),
         TETHER_ERR_INVALID_ARGUMENT);
    tether_pool_free(pool);
}

/* One relay per URL: the application's relay added by URL is found again by any spelling,
 * and a restored pool, whose checkpoint never saves an application's URL, is told it again. */
static void one_relay_per_url(void) {
    TetherPool *pool = new_pool(0);
    const char *url = "ws://127.0.0.1:7002", *spelled = "WS://127.0.0.1:7002/";
    uint32_t a = 9, again = 9;
    CODE(tether_pool_add_relay_url(pool, 0, text(url), strlen(url), &a), TETHER_OK);
    CODE(tether_pool_add_relay_url(pool, 0, text(spelled), strlen(spelled), &again), TETHER_OK);
    CHECK(a == 0 && again == 0);
    CODE(tether_pool_add_relay_url(pool, 0, text("http://a.example"), 16, &again),
         TETHER_ERR_INVALID_URL);
    CODE(tether_pool_add_relay_url(pool, 0, text(url), strlen(url), NULL), TETHER_ERR_NULL);
    TRANSMIT(pool, "{\"type\":\"open\",\"relay\":0,\"epoch\":1,\"url\":\"ws://127.0.0.1:7002\"}");
    DRAINED(pool);
    size_t len = sizeof buf;
    CODE(tether_pool_checkpoint(pool, buf, &len), TETHER_OK);
    CHECK(len < sizeof buf);
    buf[len] = 0;
    CHECK(strstr((const char *)buf, "7002") == NULL);
    TetherPoolConfig config;
    config.struct_size = sizeof config;
    CODE(tether_pool_config_default(&config), TETHER_OK);
    TetherPool *restored = NULL;
    CODE(tether_pool_restore(&config, buf, len, 0, 1700000100, &restored, NULL, NULL), TETHER_OK);
    CODE(tether_pool_name_relay(restored, 0, text(spelled), strlen(spelled)), TETHER_OK);
    CODE(tether_pool_name_relay(restored, 0, text(url), strlen(url)), TETHER_OK);
    const char *other = "ws://127.0.0.1:7003";
    CODE(tether_pool_name_relay(restored, 0, text(other), strlen(other)),
         TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_pool_name_relay(restored, 5, text(url), strlen(url)), TETHER_ERR_UNKNOWN_ID);
    CODE(tether_pool_name_relay(restored, 0, text("wss://"), 6), TETHER_ERR_INVALID_URL);
    CODE(tether_pool_add_relay_url(restored, 0, text(url), strlen(url), &again), TETHER_OK);
    CHECK(again == 0);
    tether_pool_free(restored);
    tether_pool_free(pool);
}

/* The core's private-address rule, for the addresses a routed relay's name resolves to. */
static void private_addresses(void) {
    uint32_t private_ = 9;
    const char *loopback = "127.0.0.1", *mapped = "::ffff:10.0.0.1", *public_ = "93.184.216.34";
    CODE(tether_is_private_ip((const uint8_t *)loopback, strlen(loopback), &private_), TETHER_OK);
    CHECK(private_ == 1);
    CODE(tether_is_private_ip((const uint8_t *)mapped, strlen(mapped), &private_), TETHER_OK);
    CHECK(private_ == 1);
    CODE(tether_is_private_ip((const uint8_t *)public_, strlen(public_), &private_), TETHER_OK);
    CHECK(private_ == 0);
    CODE(tether_is_private_ip((const uint8_t *)"localhost", 9, &private_), TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_is_private_ip((const uint8_t *)loopback, strlen(loopback), NULL), TETHER_ERR_NULL);
}

int main(void) {
    private_addresses();
    config_misuse();
    two_relays();
    verification();
    outbox();
    one_relay_per_url();
    if (failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    return 0;
}
