/*
 * Drives a tether relay session through the C ABI with scripted frames and checks every
 * output exactly: a rate-limited refusal with a retry hint and the gate it opens, replay
 * batches after a dropped socket, NIP-42 auth, the ABI's own error codes, and the URL rule
 * (tether_check_url).
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

typedef int32_t (*poll_fn)(TetherRelay *, uint8_t *, size_t *);

/* The next output from `poll` must be exactly `want`. */
static void expect(int line, TetherRelay *relay, poll_fn poll, const char *what,
                   const char *want) {
    size_t len = sizeof buf;
    int32_t code = poll(relay, buf, &len);
    if (code != TETHER_OK) {
        fprintf(stderr, "relay_session.c:%d: %s: code %d, want %s\n", line, what,
                (int)code, want);
        failures++;
        return;
    }
    if (len != strlen(want) || memcmp(buf, want, len) != 0) {
        fprintf(stderr, "relay_session.c:%d: %s:\n  got  %.*s\n  want %s\n", line, what,
                (int)len, (const char *)buf, want);
        failures++;
    }
}

#define TRANSMIT(relay, want) expect(__LINE__, relay, tether_relay_poll_transmit, "transmit", want)
#define EVENT(relay, want) expect(__LINE__, relay, tether_relay_poll_event, "event", want)

/* Nothing is left to drain. */
static void drained(int line, TetherRelay *relay) {
    size_t len = sizeof buf;
    int32_t code = tether_relay_poll_transmit(relay, buf, &len);
    if (code != TETHER_DONE) {
        fprintf(stderr, "relay_session.c:%d: an extra transmit (%d): %.*s\n", line,
                (int)code, (int)len, (const char *)buf);
        failures++;
    }
    len = sizeof buf;
    code = tether_relay_poll_event(relay, buf, &len);
    if (code != TETHER_DONE) {
        fprintf(stderr, "relay_session.c:%d: an extra event (%d): %.*s\n", line, (int)code,
                (int)len, (const char *)buf);
        failures++;
    }
}
#define DRAINED(relay) drained(__LINE__, relay)

static uint64_t deadline(TetherRelay *relay) {
    uint64_t at = 0;
    CODE(tether_relay_poll_timeout(relay, &at), TETHER_OK);
    return at;
}

/* The send transmit of subscription `sub`'s REQ attempt `attempt` for kind `kind`. */
static void req(char *out, int sub, int attempt, int kind) {
    snprintf(out, 512,
             "{\"type\":\"send\",\"text\":\"[\\\"REQ\\\",\\\"%x:%x\\\",{\\\"kinds\\\":[%d]}]\","
             "\"carries\":{\"req\":%d}}",
             sub, attempt, kind, sub);
}

static int32_t frame(TetherRelay *relay, uint64_t now, uint64_t epoch, const char *text) {
    return tether_relay_handle_frame(relay, now, epoch, (const uint8_t *)text, strlen(text));
}

static int32_t subscribe(TetherRelay *relay, uint64_t now, const char *filters,
                         uint64_t *sub) {
    return tether_relay_subscribe(relay, now, (const uint8_t *)filters, strlen(filters), 0,
                                  sub);
}

#define EVENT_ID "00000000000000000000000000000000000000000000000000000000000000e1"
#define AUTH_ID "00000000000000000000000000000000000000000000000000000000000000a1"
/* An event as a relay may send it: spacing and a line break kept verbatim. */
#define RAW_EVENT                                                                     \
    "{\"id\": \"" EVENT_ID "\", \"pubkey\":\"p\", \"created_at\":1700000000,\"kind\":1," \
    "\"tags\":[],\"content\":\"caf\\u00e9 \\\"quoted\\\"\",\"sig\":\"s\"}"

static void config_and_version(void) {
    CHECK(tether_abi_version() == TETHER_ABI_VERSION);

    TetherRelayConfig config;
    memset(&config, 0xff, sizeof config);
    config.struct_size = sizeof config;
    CODE(tether_relay_config_default(&config), TETHER_OK);
    CHECK(config.struct_size == sizeof config);
    CHECK(config.seed == 0 && config.max_subscriptions == 0 && config.gate_per_session == 0);
    CHECK(config.max_frame == 4u * 1024 * 1024);
    CHECK(config.eose_timeout_ms == 30000 && config.publish_timeout_ms == 10000);

    /* A struct smaller than the first version, and null pointers, are refused. */
    TetherRelay *relay = NULL;
    TetherRelayConfig small = config;
    small.struct_size = 8;
    CODE(tether_relay_config_default(&small), TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_relay_new(&small, &relay), TETHER_ERR_INVALID_ARGUMENT);
    CHECK(relay == NULL);
    CODE(tether_relay_new(NULL, &relay), TETHER_ERR_NULL);
    CODE(tether_relay_new(&config, NULL), TETHER_ERR_NULL);
    config.gate_per_session = 2;
    CODE(tether_relay_new(&config, &relay), TETHER_ERR_INVALID_ARGUMENT);

    /* A newer caller's larger struct: accepted when the unknown tail is zero. */
    struct {
        TetherRelayConfig known;
        uint64_t future_field;
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.known.struct_size = sizeof newer;
    CODE(tether_relay_config_default(&newer.known), TETHER_OK);
    CHECK(newer.known.struct_size == sizeof newer && newer.future_field == 0);
    CODE(tether_relay_new(&newer.known, &relay), TETHER_OK);
    tether_relay_free(relay);
    relay = NULL;
    newer.future_field = 1;
    CODE(tether_relay_new(&newer.known, &relay), TETHER_ERR_INVALID_ARGUMENT);
    CHECK(relay == NULL);

    /* Null handles are an error code everywhere, and freeing null is fine. */
    size_t len = sizeof buf;
    uint64_t at = 0;
    CODE(tether_relay_connect(NULL, 0), TETHER_ERR_NULL);
    CODE(tether_relay_poll_event(NULL, buf, &len), TETHER_ERR_NULL);
    CODE(tether_relay_poll_timeout(NULL, &at), TETHER_ERR_NULL);
    tether_relay_free(NULL);
}

static void session(void) {
    TetherRelayConfig config;
    config.struct_size = sizeof config;
    CODE(tether_relay_config_default(&config), TETHER_OK);
    config.seed = 7;
    TetherRelay *relay = NULL;
    CODE(tether_relay_new(&config, &relay), TETHER_OK);
    CHECK(relay != NULL);
    uint64_t at = 0;
    CODE(tether_relay_poll_timeout(relay, &at), TETHER_DONE);

    /* Ten subscriptions registered before the socket exists: nothing goes out yet. */
    uint64_t subs[10];
    for (int i = 0; i < 10; i++) {
        char filters[64];
        snprintf(filters, sizeof filters, "[{\"kinds\":[%d]}]", i + 1);
        CODE(subscribe(relay, 0, filters, &subs[i]), TETHER_OK);
    }
    CHECK(subs[0] == 0 && subs[9] == 9);
    DRAINED(relay);

    /* Misuse: bad filters, null pointers, invalid UTF-8, unknown ids and epochs. */
    uint64_t sub = 0;
    CODE(subscribe(relay, 0, "{\"kinds\":[1]}", &sub), TETHER_ERR_INVALID_ARGUMENT);
    CODE(subscribe(relay, 0, "[]", &sub), TETHER_ERR_INVALID_ARGUMENT);
    CODE(subscribe(relay, 0, "[1]", &sub), TETHER_ERR_INVALID_ARGUMENT);
    CODE(subscribe(relay, 0, "[{}]", NULL), TETHER_ERR_NULL);
    CODE(tether_relay_subscribe(relay, 0, NULL, 4, 0, &sub), TETHER_ERR_NULL);
    const uint8_t bad_utf8[] = {'[', '{', '"', 0xff, '"', ':', '1', '}', ']'};
    CODE(tether_relay_subscribe(relay, 0, bad_utf8, sizeof bad_utf8, 0, &sub), TETHER_ERR_UTF8);
    CODE(tether_relay_unsubscribe(relay, 0, 99), TETHER_ERR_UNKNOWN_ID);
    CODE(tether_relay_poll_timeout(relay, NULL), TETHER_ERR_NULL);
    /* Epoch 0 is never handed out (the first socket is 1). */
    CODE(tether_relay_handle_open(relay, 0, 0), TETHER_ERR_UNKNOWN_ID);
    CODE(tether_relay_handle_frame(relay, 0, 0, (const uint8_t *)"[]", 2), TETHER_ERR_UNKNOWN_ID);
    CODE(tether_relay_handle_open(relay, 0, 1), TETHER_ERR_UNKNOWN_ID);
    /* The last error says what was wrong; a too-small buffer gets the length needed. */
    size_t len = 4;
    CODE(tether_relay_last_error(relay, buf, &len), TETHER_ERR_BUFFER_TOO_SMALL);
    CHECK(len == strlen("epoch 1 was never opened"));
    CODE(tether_relay_last_error(relay, buf, &len), TETHER_OK);
    CHECK(memcmp(buf, "epoch 1 was never opened", len) == 0);

    /* Connect, open: connected, then the replay in batches of 8, 50 ms apart. */
    CODE(tether_relay_connect(relay, 1000), TETHER_OK);
    TRANSMIT(relay, "{\"type\":\"open\",\"epoch\":1}");
    DRAINED(relay);
    CHECK(deadline(relay) == 11000); /* the connect timeout */
    CODE(frame(relay, 1000, 1, "[\"EOSE\",\"1:0\"]"), TETHER_ERR_WRONG_STATE);
    CODE(tether_relay_handle_open(relay, 1010, 1), TETHER_OK);
    CODE(tether_relay_handle_open(relay, 1010, 1), TETHER_ERR_WRONG_STATE);
    EVENT(relay, "{\"type\":\"connected\"}");
    char want[512];
    for (int i = 0; i < 8; i++) {
        req(want, i, 1, i + 1);
        TRANSMIT(relay, want);
    }
    DRAINED(relay);
    CHECK(deadline(relay) == 1060);
    CODE(tether_relay_handle_timeout(relay, 1060), TETHER_OK);
    req(want, 8, 1, 9);
    TRANSMIT(relay, want);
    req(want, 9, 1, 10);
    TRANSMIT(relay, want);
    DRAINED(relay);

    /* A too-small buffer keeps the event; the relay's event JSON comes through verbatim (one
     * holding a line break would be compacted, as every line is). */
    CODE(frame(relay, 1100, 1, "[\"EVENT\",\"0:1\"," RAW_EVENT "]"), TETHER_OK);
    const char *received =
        "{\"type\":\"event\",\"sub\":0,\"id\":\"" EVENT_ID "\",\"event\":" RAW_EVENT "}";
    len = 10;
    CODE(tether_relay_poll_event(relay, buf, &len), TETHER_ERR_BUFFER_TOO_SMALL);
    CHECK(len == strlen(received));
    CHECK(deadline(relay) == 1100); /* output is held: poll_timeout says now */
    CODE(tether_relay_poll_event(relay, NULL, &len), TETHER_ERR_NULL);
    EVENT(relay, received);
    DRAINED(relay);
    CODE(frame(relay, 1100, 1, "[\"EOSE\",\"0:1\"]"), TETHER_OK);
    EVENT(relay, "{\"type\":\"eose\",\"sub\":0}");
    DRAINED(relay);

    /* Subscription 1 is refused for budget with a hint: the gate opens for 3 s and the
     * retry waits behind it. */
    CODE(frame(relay, 1200, 1, "[\"CLOSED\",\"1:1\",\"rate-limited: slow down, retry in 3s\"]"),
         TETHER_OK);
    EVENT(relay, "{\"type\":\"rate_limited\",\"window_ms\":3000}");
    EVENT(relay, "{\"type\":\"retrying\",\"sub\":1,\"in_ms\":3000,\"attempt\":1}");
    DRAINED(relay);
    /* A new subscription is not held by the gate. */
    CODE(subscribe(relay, 1300, "[{\"kinds\":[11]}]", &sub), TETHER_OK);
    CHECK(sub == 10);
    req(want, 10, 1, 11);
    TRANSMIT(relay, want);
    DRAINED(relay);
    CHECK(deadline(relay) == 4200);
    CODE(tether_relay_handle_timeout(relay, 4100), TETHER_OK);
    DRAINED(relay);
    CODE(tether_relay_handle_timeout(relay, 4200), TETHER_OK);
    req(want, 1, 2, 2);
    TRANSMIT(relay, want);
    DRAINED(relay);
    CODE(frame(relay, 4300, 1, "[\"EOSE\",\"1:2\"]"), TETHER_OK);
    EVENT(relay, "{\"type\":\"eose\",\"sub\":1}");
    /* A frame for the superseded attempt is counted and ignored. */
    CODE(frame(relay, 4300, 1, "[\"EOSE\",\"1:1\"]"), TETHER_OK);
    /* Garbage from the peer is an event, not an error code. */
    CODE(frame(relay, 4300, 1, "[\"NOPE\"]"), TETHER_OK);
    EVENT(relay, "{\"type\":\"peer_error\",\"kind\":\"unknown_verb\",\"excerpt\":\"unknown verb \\\"NOPE\\\"\"}");
    DRAINED(relay);

    /* NIP-42: a challenge, the host's signed answer, the relay's OK. */
    CODE(frame(relay, 5000, 1, "[\"AUTH\",\"challenge-1\"]"), TETHER_OK);
    EVENT(relay, "{\"type\":\"auth\",\"challenge\":\"challenge-1\",\"id\":1}");
    DRAINED(relay);
    const char *auth = "{\"id\":\"" AUTH_ID "\",\"kind\":22242,\"created_at\":1700000001}";
    uint8_t id[32];
    CODE(tether_relay_authenticate(relay, 5010, 2, (const uint8_t *)auth, strlen(auth), id),
         TETHER_ERR_WRONG_STATE);
    CODE(tether_relay_authenticate(relay, 5010, 1, (const uint8_t *)"{}", 2, id),
         TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_relay_authenticate(relay, 5010, 1, (const uint8_t *)auth, strlen(auth), id),
         TETHER_OK);
    CHECK(id[31] == 0xa1 && id[0] == 0);
    TRANSMIT(relay, "{\"type\":\"send\",\"text\":\"[\\\"AUTH\\\",{\\\"id\\\":\\\"" AUTH_ID
                    "\\\",\\\"kind\\\":22242,\\\"created_at\\\":1700000001}]\","
                    "\"carries\":{\"auth\":\"" AUTH_ID "\"}}");
    DRAINED(relay);
    CODE(frame(relay, 5020, 1, "[\"OK\",\"" AUTH_ID "\",true,\"\"]"), TETHER_OK);
    EVENT(relay, "{\"type\":\"authenticated\"}");
    DRAINED(relay);

    /* The socket drops: a reconnect after backoff, then every subscription replayed in
     * batches of 8, the one that saw an event asking only for what it missed. */
    CODE(tether_relay_handle_close(relay, 6000, 1, 99, -1), TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_relay_handle_close(relay, 6000, 1, TETHER_LOSS_CLOSED_BY_PEER, 1006), TETHER_OK);
    EVENT(relay, "{\"type\":\"disconnected\",\"reconnect_in_ms\":778,\"why\":\"closed_by_peer\","
                 "\"close_code\":1006}");
    DRAINED(relay);
    CHECK(deadline(relay) == 6779);
    CODE(frame(relay, 6700, 1, "[\"EOSE\",\"0:1\"]"), TETHER_OK); /* stale epoch: ignored */
    DRAINED(relay);
    CODE(tether_relay_handle_timeout(relay, 6779), TETHER_OK);
    TRANSMIT(relay, "{\"type\":\"open\",\"epoch\":2}");
    DRAINED(relay);
    CODE(tether_relay_handle_open(relay, 6790, 2), TETHER_OK);
    EVENT(relay, "{\"type\":\"connected\"}");
    /* No wall clock was given: the catch-up window is anchored at the newest event seen,
     * minus the 120 s lookback; the live half keeps the filter with "limit":0. */
    TRANSMIT(relay, "{\"type\":\"send\",\"text\":\"[\\\"REQ\\\",\\\"0:2\\\",{\\\"kinds\\\":[1],"
                    "\\\"limit\\\":0},{\\\"kinds\\\":[1],\\\"limit\\\":500,"
                    "\\\"since\\\":1699999880}]\",\"carries\":{\"req\":0}}");
    /* Subscription 1 was live but saw nothing and has no clock to anchor on: its window is
     * everything, a page at a time. */
    TRANSMIT(relay, "{\"type\":\"send\",\"text\":\"[\\\"REQ\\\",\\\"1:3\\\",{\\\"kinds\\\":[2],"
                    "\\\"limit\\\":0},{\\\"kinds\\\":[2],\\\"limit\\\":500,"
                    "\\\"since\\\":0}]\",\"carries\":{\"req\":1}}");
    for (int i = 2; i < 8; i++) {
        req(want, i, 2, i + 1);
        TRANSMIT(relay, want);
    }
    DRAINED(relay);
    CHECK(deadline(relay) == 6840);
    CODE(tether_relay_handle_timeout(relay, 6840), TETHER_OK);
    for (int i = 8; i <= 10; i++) {
        req(want, i, 2, i + 1);
        TRANSMIT(relay, want);
    }
    DRAINED(relay);

    /* Unsubscribe sends a CLOSE; disconnect closes the socket and says so. */
    CODE(tether_relay_unsubscribe(relay, 7300, 2), TETHER_OK);
    TRANSMIT(relay, "{\"type\":\"send\",\"text\":\"[\\\"CLOSE\\\",\\\"2:2\\\"]\","
                    "\"carries\":{\"close\":2}}");
    DRAINED(relay);
    CODE(tether_relay_unsubscribe(relay, 7300, 2), TETHER_ERR_UNKNOWN_ID);
    CODE(tether_relay_disconnect(relay, 7400), TETHER_OK);
    TRANSMIT(relay, "{\"type\":\"close\",\"epoch\":2}");
    EVENT(relay, "{\"type\":\"disconnected\",\"reconnect_in_ms\":null,\"why\":\"requested\"}");
    DRAINED(relay);
    CODE(tether_relay_poll_timeout(relay, &at), TETHER_DONE);
    CODE(tether_relay_authenticate(relay, 7500, 1, (const uint8_t *)auth, strlen(auth), NULL),
         TETHER_ERR_WRONG_STATE);

    /* The lifecycle: an unknown signal is misuse; offline, a connect asks for no socket
     * until the network is back, then one within the 1 s jitter. */
    CODE(tether_relay_lifecycle(relay, 7600, 99), TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_relay_lifecycle(relay, 7600, TETHER_LIFECYCLE_OFFLINE), TETHER_OK);
    CODE(tether_relay_connect(relay, 7700), TETHER_OK);
    DRAINED(relay);
    CODE(tether_relay_poll_timeout(relay, &at), TETHER_DONE);
    CODE(tether_relay_lifecycle(relay, 9000, TETHER_LIFECYCLE_ONLINE), TETHER_OK);
    CODE(tether_relay_poll_timeout(relay, &at), TETHER_OK);
    CHECK(at >= 9000 && at <= 10000);
    tether_relay_free(relay);
}

/* The URL check must give `want` and, unless it passed, exactly `message`. */
static void expect_url(int line, const char *url, uint32_t kind, int32_t want,
                       const char *message) {
    uint8_t why[256];
    size_t len = sizeof why;
    int32_t code = tether_check_url((const uint8_t *)url, strlen(url), kind, why, &len);
    if (code != want || len != strlen(message) || memcmp(why, message, len) != 0) {
        fprintf(stderr, "relay_session.c:%d: %s: code %d, want %d\n  got  %.*s\n  want %s\n",
                line, url, (int)code, (int)want, (int)len, (const char *)why, message);
        failures++;
    }
}

#define URL(url, kind, want, message) expect_url(__LINE__, url, kind, want, message)

static void url_rule(void) {
    URL("wss://relay.example.com/", TETHER_URL_RELAY, TETHER_OK, "");
    URL("https://example.com:8443/events", TETHER_URL_SSE, TETHER_OK, "");
    URL("ws://127.0.0.1:99999/", TETHER_URL_RELAY, TETHER_ERR_INVALID_URL,
        "invalid URL: ws://127.0.0.1:99999/: port 99999 is not in 1-65535");
    URL("http://relay.example.com", TETHER_URL_RELAY, TETHER_ERR_INVALID_URL,
        "invalid URL: http://relay.example.com: expected ws:// or wss://");
    URL("wss://relay.example.com", TETHER_URL_SSE, TETHER_ERR_INVALID_URL,
        "invalid URL: wss://relay.example.com: expected http:// or https://");
    URL("wss://relay.example.com", 9, TETHER_ERR_INVALID_ARGUMENT,
        "kind 9 is neither TETHER_URL_RELAY (1) nor TETHER_URL_SSE (2)");
    /* The code alone, and the length a message needs. */
    const char *bad = "ws://h:0";
    CODE(tether_check_url((const uint8_t *)bad, strlen(bad), TETHER_URL_RELAY, NULL, NULL),
         TETHER_ERR_INVALID_URL);
    size_t need = 0;
    CODE(tether_check_url((const uint8_t *)bad, strlen(bad), TETHER_URL_RELAY, NULL, &need),
         TETHER_ERR_BUFFER_TOO_SMALL);
    CHECK(need == strlen("invalid URL: ws://h:0: port 0 is not in 1-65535"));
}

/* A session with two subscriptions checkpointed, restored into a new handle (the ids kept,
 * both sent again on the new socket), and bytes that are not a checkpoint refused. */
static void checkpoint(void) {
    TetherRelayConfig config;
    config.struct_size = sizeof config;
    CODE(tether_relay_config_default(&config), TETHER_OK);
    config.seed = 3;
    TetherRelay *relay = NULL;
    CODE(tether_relay_new(&config, &relay), TETHER_OK);
    CODE(tether_relay_set_wall_clock(relay, 0, 1750000000), TETHER_OK);
    uint64_t a = 0, b = 0;
    CODE(subscribe(relay, 0, "[{\"kinds\":[1]}]", &a), TETHER_OK);
    CODE(subscribe(relay, 0, "[{\"kinds\":[7]}]", &b), TETHER_OK);
    size_t len = 8;
    CODE(tether_relay_checkpoint(relay, buf, &len), TETHER_ERR_BUFFER_TOO_SMALL);
    size_t need = len;
    CHECK(need > 8 && need < sizeof buf);
    len = sizeof buf;
    CODE(tether_relay_checkpoint(relay, buf, &len), TETHER_OK);
    CHECK(len == need);
    const char *head = "{\"tether\":\"relay\",\"version\":1,";
    CHECK(memcmp(buf, head, strlen(head)) == 0);
    tether_relay_free(relay);

    TetherRelay *restored = NULL;
    char why[256];
    size_t why_len = sizeof why;
    CODE(tether_relay_restore(&config, buf, len, 0, 1750000100, &restored, (uint8_t *)why,
                              &why_len),
         TETHER_OK);
    CHECK(restored != NULL && why_len == 0);
    CODE(tether_relay_connect(restored, 0), TETHER_OK);
    TRANSMIT(restored, "{\"type\":\"open\",\"epoch\":1}");
    CODE(tether_relay_handle_open(restored, 10, 1), TETHER_OK);
    char want[512];
    req(want, 0, 1, 1);
    TRANSMIT(restored, want);
    req(want, 1, 1, 7);
    TRANSMIT(restored, want);
    CODE(tether_relay_unsubscribe(restored, 10, b), TETHER_OK);
    tether_relay_free(restored);

    /* Not a checkpoint; a newer format: typed codes, the reason in `why`, no handle. */
    TetherRelay *none = NULL;
    const char *junk = "{\"kinds\":[1]}";
    why_len = sizeof why;
    CODE(tether_relay_restore(&config, (const uint8_t *)junk, strlen(junk), 0, 0, &none,
                              (uint8_t *)why, &why_len),
         TETHER_ERR_CHECKPOINT);
    CHECK(none == NULL && why_len > 0);
    const char *newer = "{\"tether\":\"relay\",\"version\":9}";
    why_len = sizeof why;
    CODE(tether_relay_restore(&config, (const uint8_t *)newer, strlen(newer), 0, 0, &none,
                              (uint8_t *)why, &why_len),
         TETHER_ERR_CHECKPOINT_NEWER);
    CHECK(none == NULL);
    CODE(tether_relay_restore(&config, (const uint8_t *)newer, strlen(newer), 0, 0, &none, NULL,
                              NULL),
         TETHER_ERR_CHECKPOINT_NEWER);
}

int main(void) {
    config_and_version();
    url_rule();
    session();
    checkpoint();
    if (failures != 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("relay_session: all checks passed\n");
    return 0;
}
