/*
 * Drives a tether SSE session through the C ABI: a stream opens, a message split across
 * chunks, the end of the body and a reconnect carrying Last-Event-ID, a 503 with
 * Retry-After (delta-seconds, then an HTTP-date against the wall clock), misuse codes, and
 * a local close. Every output is checked exactly. Built and run like relay_session.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tether.h"

static int failures = 0;
static uint8_t buf[4096];

#define CODE(call, want)                                                          \
    do {                                                                          \
        int32_t got_ = (call);                                                    \
        if (got_ != (want)) {                                                     \
            fprintf(stderr, "%s:%d: %s returned %d, want %d\n", __FILE__, __LINE__, \
                    #call, (int)got_, (int)(want));                               \
            failures++;                                                           \
        }                                                                         \
    } while (0)

typedef int32_t (*poll_fn)(TetherSse *, uint8_t *, size_t *);

static void expect(int line, TetherSse *sse, poll_fn poll, const char *want) {
    size_t len = sizeof buf;
    int32_t code = poll(sse, buf, &len);
    if (want == NULL) {
        if (code != TETHER_DONE) {
            fprintf(stderr, "sse_session.c:%d: extra output (%d): %.*s\n", line, (int)code,
                    (int)len, (const char *)buf);
            failures++;
        }
        return;
    }
    if (code != TETHER_OK || len != strlen(want) || memcmp(buf, want, len) != 0) {
        fprintf(stderr, "sse_session.c:%d: code %d\n  got  %.*s\n  want %s\n", line, (int)code,
                code == TETHER_OK ? (int)len : 0, (const char *)buf, want);
        failures++;
    }
}

#define TRANSMIT(sse, want) expect(__LINE__, sse, tether_sse_poll_transmit, want)
#define EVENT(sse, want) expect(__LINE__, sse, tether_sse_poll_event, want)
#define DRAINED(sse)                                         \
    do {                                                     \
        expect(__LINE__, sse, tether_sse_poll_transmit, NULL); \
        expect(__LINE__, sse, tether_sse_poll_event, NULL);    \
    } while (0)

static const uint8_t *text(const char *s) { return (const uint8_t *)s; }

static int32_t response(TetherSse *sse, uint64_t now, uint64_t epoch, uint16_t status,
                        const char *content_type, const char *retry_after) {
    return tether_sse_handle_response(sse, now, epoch, status, text(content_type),
                                      content_type ? strlen(content_type) : 0, text(retry_after),
                                      retry_after ? strlen(retry_after) : 0);
}

static uint64_t deadline(TetherSse *sse) {
    uint64_t at = 0;
    CODE(tether_sse_poll_timeout(sse, &at), TETHER_OK);
    return at;
}

int main(void) {
    TetherSseConfig config;
    config.struct_size = sizeof config;
    CODE(tether_sse_config_default(&config), TETHER_OK);
    if (config.idle_timeout_ms != 90000 || config.connect_timeout_ms != 30000) {
        fprintf(stderr, "unexpected SSE defaults\n");
        failures++;
    }
    config.seed = 5;
    TetherSse *sse = NULL;
    CODE(tether_sse_new(&config, &sse), TETHER_OK);
    CODE(tether_sse_set_wall_clock(sse, 0, 1445412480), TETHER_OK); /* 2015-10-21 07:28:00 */

    CODE(tether_sse_connect(sse, 0), TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"open\",\"epoch\":1,\"last_event_id\":null,"
                  "\"redirect\":null,\"method\":\"GET\",\"headers\":[[\"accept\",\"text/event-stream\"],[\"cache-control\",\"no-cache\"],[\"accept-encoding\",\"identity\"]],\"body\":\"\",\"withhold\":[],\"attempt\":\"original\",\"number\":1,\"after\":null}");
    DRAINED(sse);
    size_t consumed = 0;
    CODE(tether_sse_handle_bytes(sse, 5, 1, text("data: x\n\n"), 9, &consumed),
         TETHER_ERR_WRONG_STATE);
    CODE(tether_sse_handle_bytes(sse, 5, 9, text("data: x\n\n"), 9, &consumed),
         TETHER_ERR_UNKNOWN_ID);
    /* Epoch 0 is never handed out (the first request is 1). */
    CODE(tether_sse_handle_bytes(sse, 5, 0, text("data: x\n\n"), 9, &consumed),
         TETHER_ERR_UNKNOWN_ID);
    CODE(tether_sse_handle_error(sse, 5, 1, 0), TETHER_ERR_INVALID_ARGUMENT);
    CODE(response(sse, 10, 1, 200, "text/event-stream; charset=utf-8", NULL), TETHER_OK);
    EVENT(sse, "{\"type\":\"open\"}");
    DRAINED(sse);
    CODE(response(sse, 10, 1, 200, "text/event-stream", NULL), TETHER_ERR_WRONG_STATE);

    /* One message split across chunks, with an id and a retry field. */
    CODE(tether_sse_handle_bytes(sse, 20, 1, text("retry: 2000\nid: 1\nda"), 20, &consumed),
         TETHER_OK);
    if (consumed != 20) failures++;
    DRAINED(sse);
    CODE(tether_sse_handle_bytes(sse, 30, 1, text("ta: caf\xc3\xa9 \"hi\"\n\n"), 16, &consumed),
         TETHER_OK);
    if (consumed != 16) failures++;
    size_t len = 8;
    CODE(tether_sse_poll_event(sse, buf, &len), TETHER_ERR_BUFFER_TOO_SMALL);
    EVENT(sse, "{\"type\":\"message\",\"event\":\"message\",\"data\":\"caf\xc3\xa9 \\\"hi\\\"\","
               "\"id\":\"1\"}");
    DRAINED(sse);
    len = sizeof buf;
    CODE(tether_sse_last_event_id(sse, buf, &len), TETHER_OK);
    if (len != 1 || buf[0] != '1') failures++;
    if (deadline(sse) != 90030) failures++; /* the idle watchdog */

    /* The body ends: a reconnect no sooner than the retry field (2 s) and at most 20% later,
     * carrying Last-Event-ID. */
    CODE(tether_sse_handle_eof(sse, 1000, 1), TETHER_OK);
    EVENT(sse, "{\"type\":\"reconnecting\",\"in_ms\":2115,\"last_event_id\":\"1\","
               "\"attempt\":1,\"why\":\"eof\",\"reason\":\"stream ended\"}");
    DRAINED(sse);
    if (deadline(sse) != 3116) failures++;
    CODE(tether_sse_handle_eof(sse, 1000, 1), TETHER_OK); /* stale: ignored */
    DRAINED(sse);
    CODE(tether_sse_handle_timeout(sse, 3116), TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"open\",\"epoch\":2,\"last_event_id\":\"1\","
                  "\"redirect\":null,\"method\":\"GET\",\"headers\":[[\"accept\",\"text/event-stream\"],[\"cache-control\",\"no-cache\"],[\"accept-encoding\",\"identity\"]],\"body\":\"\",\"withhold\":[],\"attempt\":\"original\",\"number\":2,\"after\":\"eof\"}");
    DRAINED(sse);

    /* 503 with Retry-After: 60 s: no sooner than that. */
    CODE(response(sse, 3140, 2, 503, "text/plain", "60"), TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"close\",\"epoch\":2}");
    EVENT(sse, "{\"type\":\"reconnecting\",\"in_ms\":60000,\"last_event_id\":\"1\","
               "\"attempt\":2,\"why\":\"status\",\"status\":503,\"reason\":\"HTTP status 503\"}");
    DRAINED(sse);
    CODE(tether_sse_handle_timeout(sse, 63140), TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"open\",\"epoch\":3,\"last_event_id\":\"1\","
                  "\"redirect\":null,\"method\":\"GET\",\"headers\":[[\"accept\",\"text/event-stream\"],[\"cache-control\",\"no-cache\"],[\"accept-encoding\",\"identity\"]],\"body\":\"\",\"withhold\":[],\"attempt\":\"original\",\"number\":3,\"after\":\"status\"}");
    DRAINED(sse);
    /* 429 with an HTTP-date 119 s after the wall clock's now (63 s after it was set). */
    CODE(response(sse, 63140, 3, 429, NULL, "Wed, 21 Oct 2015 07:31:02 GMT"), TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"close\",\"epoch\":3}");
    EVENT(sse, "{\"type\":\"reconnecting\",\"in_ms\":119000,\"last_event_id\":\"1\","
               "\"attempt\":3,\"why\":\"status\",\"status\":429,\"reason\":\"HTTP status 429\"}");
    DRAINED(sse);

    /* A 307 is the core's to follow: the same attempt and epoch, to the resolved Location. */
    CODE(tether_sse_handle_timeout(sse, 182140), TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"open\",\"epoch\":4,\"last_event_id\":\"1\","
                  "\"redirect\":null,\"method\":\"GET\",\"headers\":[[\"accept\",\"text/event-stream\"],[\"cache-control\",\"no-cache\"],[\"accept-encoding\",\"identity\"]],\"body\":\"\",\"withhold\":[],\"attempt\":\"original\",\"number\":4,\"after\":\"status\"}");
    DRAINED(sse);
    const char *url = "https://a.example/v1/stream";
    const char *location = "/v2/stream";
    CODE(tether_sse_handle_head(sse, 182150, 4, 307, NULL, 0, NULL, 0, NULL, 0,
                                (const uint8_t *)location, strlen(location),
                                (const uint8_t *)url, strlen(url)),
         TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"open\",\"epoch\":4,\"last_event_id\":\"1\","
                  "\"redirect\":\"https://a.example/v2/stream\",\"method\":\"GET\",\"headers\":[[\"accept\",\"text/event-stream\"],[\"cache-control\",\"no-cache\"],[\"accept-encoding\",\"identity\"]],\"body\":\"\",\"withhold\":[],\"attempt\":\"original\","
                  "\"number\":5,\"after\":\"status\"}");
    DRAINED(sse);

    /* A local close aborts the live request and ends it, once. */
    CODE(tether_sse_disconnect(sse, 190000), TETHER_OK);
    TRANSMIT(sse, "{\"type\":\"close\",\"epoch\":4}");
    TRANSMIT(sse, "{\"type\":\"end\"}");
    EVENT(sse, "{\"type\":\"closed\",\"reason\":\"closed\"}");
    DRAINED(sse);
    uint64_t at = 0;
    CODE(tether_sse_poll_timeout(sse, &at), TETHER_DONE);
    tether_sse_free(sse);

    /* A POST: each open says what it sends; a cut after it opened is the end (never). */
    const char *post = "{\"method\":\"POST\",\"headers\":[[\"accept\",\"text/event-stream\"],[\"cache-control\",\"no-cache\"],[\"accept-encoding\",\"identity\"],[\"content-type\",\"application/json\"]],"
                       "\"body\":\"{}\",\"end_data\":\"[DONE]\"}";
    TetherSse *poster = NULL;
    CODE(tether_sse_new_request(&config, text(post), strlen(post), &poster), TETHER_OK);
    CODE(tether_sse_connect(poster, 0), TETHER_OK);
    TRANSMIT(poster, "{\"type\":\"open\",\"epoch\":1,\"last_event_id\":null,\"redirect\":null,"
                     "\"method\":\"POST\",\"headers\":[[\"accept\",\"text/event-stream\"],[\"cache-control\",\"no-cache\"],[\"accept-encoding\",\"identity\"],[\"content-type\",\"application/json\"]],"
                     "\"body\":\"{}\",\"withhold\":[],\"attempt\":\"original\",\"number\":1,"
                     "\"after\":null}");
    DRAINED(poster);
    const char *bad = "{\"resume\":\"sometimes\"}";
    TetherSse *refused = NULL;
    CODE(tether_sse_new_request(&config, text(bad), strlen(bad), &refused),
         TETHER_ERR_INVALID_ARGUMENT);
    tether_sse_free(refused);

    /* A POST's checkpoint restores for the request the host rebuilds, not as a GET. */
    uint8_t saved[4096];
    size_t saved_len = sizeof saved;
    CODE(tether_sse_checkpoint(poster, 0, saved, &saved_len), TETHER_OK);
    TetherSse *again = NULL;
    CODE(tether_sse_restore(&config, saved, saved_len, &again, NULL, NULL), TETHER_ERR_CHECKPOINT);
    CODE(tether_sse_restore_request(&config, text(bad), strlen(bad), saved, saved_len, &again,
                                    NULL, NULL),
         TETHER_ERR_INVALID_ARGUMENT);
    CODE(tether_sse_restore_request(&config, text(post), strlen(post), saved, saved_len, &again,
                                    NULL, NULL),
         TETHER_OK);
    CODE(tether_sse_connect(again, 0), TETHER_OK);
    /* It was out when the checkpoint was taken and `never` may not send it again. */
    EVENT(again, "{\"type\":\"failed\",\"status\":null,\"reason\":\"stream lost (the process "
                 "restarted) and the request may not be sent again\",\"kind\":\"interrupted\","
                 "\"events\":0,\"last_event_id\":\"\"}");
    TRANSMIT(again, "{\"type\":\"end\"}");
    DRAINED(again);
    tether_sse_free(again);
    tether_sse_free(poster);

    /* Verification needs no handle: a verdict, not an error, for a bad event. */
    const char *forged = "{\"id\":\"00\",\"pubkey\":\"00\",\"created_at\":1,\"kind\":1,"
                         "\"tags\":[],\"content\":\"\",\"sig\":\"00\"}";
    CODE(tether_verify_event(text(forged), strlen(forged)), TETHER_VERIFY_BAD_ID);
    CODE(tether_verify_event(text("{}"), 2), TETHER_VERIFY_MALFORMED);
    CODE(tether_verify_event(NULL, 3), TETHER_ERR_NULL);

    if (failures != 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("sse_session: all checks passed\n");
    return 0;
}
