package io.backplane.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The SSE reader and the OpenAI chunk rules, fed lines with made-up arrival times (a fake clock):
 * the figures computed from them are exact, and nothing here measures time.
 */
class SseStreamTest {
    private static final String ROLE = "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}";

    private static String content(String text) {
        return "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text + "\"},\"finish_reason\":null}],\"usage\":null}";
    }

    private static String content(String text, int cumulativeTokens) {
        return "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text + "\"},\"finish_reason\":null}],"
                + "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":" + cumulativeTokens + ",\"total_tokens\":" + (7 + cumulativeTokens) + "}}";
    }

    private static String usage(int completionTokens) {
        return "{\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":" + completionTokens + ",\"total_tokens\":"
                + (7 + completionTokens) + "}}";
    }

    /** Feeds each event as {@code data: …} and a blank line, the i-th at times[i]. */
    private static SseStream feed(SseStream s, List<String> events, long... times) {
        for (int i = 0; i < events.size(); i++) {
            s.line("data: " + events.get(i), times[i]);
            s.line("", times[i]);
        }
        return s;
    }

    private static List<long[]> itl(SseStream.Generation g) {
        List<long[]> out = new ArrayList<>();
        g.interTokenLatencies((nanos, tokens) -> out.add(new long[] {nanos, tokens}));
        return out;
    }

    @Test
    void chat_roleChunkFirst_ttftFromTheFirstContentChunk_outputTokensFromTheFinalUsage() {
        SseStream s = feed(new SseStream(true, 1000, SseStream.Listener.NONE),
                List.of(ROLE, content("Once"), content(" upon"), content(" a time"), usage(4), "[DONE]"), 1100, 1500, 1700, 2300, 2400, 2500);
        SseStream.Generation g = s.end(2600);
        assertEquals(1100, g.firstEventNanos(), "the role-only chunk is an event");
        assertEquals(3, g.contentChunks(), "the role chunk's empty content and the usage chunk are not content");
        assertEquals(500, g.ttftNanos(), "from sending (1000) to the first content chunk (1500), not to the role chunk (1100)");
        assertEquals(4, g.outputTokens());
        assertTrue(g.outputFromUsage());
        assertFalse(g.tokensFromUsage(), "usage only in the last chunk: one token per content chunk");
        assertEquals(List.of(List.of(200L, 1L), List.of(600L, 1L)), itl(g).stream().map(a -> List.of(a[0], a[1])).toList());
        assertEquals(2600, g.endNanos());
    }

    @Test
    void chat_usageOnEveryChunk_tokensPerChunkFromUsageDeltas() {
        SseStream s = feed(new SseStream(true, 0, SseStream.Listener.NONE),
                List.of(ROLE, content("a", 2), content("b", 5), content("c", 6), usage(6), "[DONE]"), 10, 100, 400, 700, 710, 720);
        SseStream.Generation g = s.end(800);
        assertTrue(g.tokensFromUsage());
        assertArrayEquals(new int[] {2, 3, 1}, g.tokens());
        assertEquals(6, g.outputTokens());
        // (400 - 100) / 3 tokens, counted 3 times; (700 - 400) / 1 token
        assertEquals(List.of(List.of(100L, 3L), List.of(300L, 1L)), itl(g).stream().map(a -> List.of(a[0], a[1])).toList());
    }

    @Test
    void chat_chunkWithNoNewTokenByUsage_nextGapRunsFromTheLastChunkThatBroughtOne() {
        SseStream s = feed(new SseStream(true, 0, SseStream.Listener.NONE),
                List.of(content("a", 1), content("b", 1), content("c", 3), "[DONE]"), 100, 200, 500, 600);
        SseStream.Generation g = s.end(600);
        assertArrayEquals(new int[] {1, 0, 2}, g.tokens());
        assertEquals(List.of(List.of(200L, 2L)), itl(g).stream().map(a -> List.of(a[0], a[1])).toList());
    }

    @Test
    void noUsage_outputTokensAreTheContentChunks() {
        SseStream.Generation g = feed(new SseStream(true, 0, SseStream.Listener.NONE), List.of(ROLE, content("a"), content("b"), "[DONE]"),
                1, 2, 3, 4).end(5);
        assertEquals(2, g.outputTokens());
        assertFalse(g.outputFromUsage());
        assertFalse(g.tokensFromUsage());
    }

    @Test
    void completions_contentIsTheChoicesText() {
        SseStream s = feed(new SseStream(false, 0, SseStream.Listener.NONE), List.of("{\"choices\":[{\"index\":0,\"text\":\"\"}]}",
                "{\"choices\":[{\"index\":0,\"text\":\"x\"}]}", "{\"choices\":[{\"index\":0,\"text\":\"y\"}]}", usage(2), "[DONE]"), 5, 10, 20, 21, 22);
        SseStream.Generation g = s.end(30);
        assertEquals(2, g.contentChunks());
        assertEquals(10, g.ttftNanos());
        // a chat reader finds no delta.content there
        assertEquals(0, feed(new SseStream(true, 0, SseStream.Listener.NONE), List.of("{\"choices\":[{\"index\":0,\"text\":\"x\"}]}", "[DONE]"),
                1, 2).end(3).contentChunks());
    }

    @Test
    void framing_multiLineData_commentsOtherFields_noSpaceAfterColon_eventLeftOpenAtTheEnd() {
        SseStream s = new SseStream(true, 0, SseStream.Listener.NONE);
        s.line(": keep-alive", 1);
        s.line("", 1); // a blank line with no event open: nothing
        s.line("id: 1", 2);
        s.line("event: message", 2);
        s.line("data: {\"choices\":[{\"index\":0,", 2);
        s.line("data:\"delta\":{\"content\":\"a\"}}]}", 3); // joined with a newline: still one JSON object
        s.line("retry: 100", 3);
        s.line("", 4);
        s.line("data: [DONE]", 5); // no blank line before the body ends
        SseStream.Generation g = s.end(6);
        assertEquals(1, g.contentChunks());
        assertEquals(4, g.contentNanos()[0], "an event is timed when it is complete (its blank line)");
    }

    @Test
    void listener_toldOfEachEventAndWhetherItHadContent() {
        List<String> seen = new ArrayList<>();
        feed(new SseStream(true, 0, (content, nanos) -> seen.add(content + "@" + nanos)), List.of(ROLE, content("a"), usage(1), "[DONE]"),
                1, 2, 3, 4).end(5);
        assertEquals(List.of("false@1", "true@2", "false@3", "false@4"), seen);
    }

    @Test
    void errorObjectInTheStream_failsWithItsMessage_laterEventsIgnored() {
        SseStream s = feed(new SseStream(true, 0, SseStream.Listener.NONE),
                List.of(ROLE, content("a"), "{\"error\":{\"message\":\"model crashed\",\"type\":\"server_error\",\"code\":null}}", content("b")),
                1, 2, 3, 4);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.end(5));
        assertEquals("model crashed (type server_error)", e.getMessage());
    }

    @Test
    void errorEventType_failsWithItsData() {
        SseStream s = new SseStream(true, 0, SseStream.Listener.NONE);
        s.line("event: error", 1);
        s.line("data: {\"message\":\"overloaded\"}", 1);
        s.line("", 1);
        assertTrue(assertThrows(IllegalStateException.class, () -> s.end(2)).getMessage().contains("overloaded"));
    }

    @Test
    void streamWithoutDone_fails_sayingSo() {
        SseStream s = feed(new SseStream(true, 0, SseStream.Listener.NONE), List.of(ROLE, content("a")), 1, 2);
        assertEquals("the stream ended without 'data: [DONE]' after 2 event(s)", assertThrows(IllegalStateException.class, () -> s.end(3)).getMessage());
    }

    @Test
    void eventsAfterDone_ignored() {
        SseStream.Generation g = feed(new SseStream(true, 0, SseStream.Listener.NONE), List.of(content("a"), "[DONE]", content("b"), "not json"),
                1, 2, 3, 4).end(5);
        assertEquals(1, g.contentChunks());
    }

    @Test
    void chunkThatIsNotJson_fails_quotingIt() {
        SseStream s = feed(new SseStream(true, 0, SseStream.Listener.NONE), List.of("hello", "[DONE]"), 1, 2);
        assertEquals("event 1 is not JSON: hello", assertThrows(IllegalStateException.class, () -> s.end(3)).getMessage());
    }

    @Test
    void errorBody_openAiErrorObjectOrText() {
        assertEquals("Incorrect API key provided (type invalid_request_error, code invalid_api_key)", SseStream.errorMessage(
                "{\"error\":{\"message\":\"Incorrect API key provided\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_api_key\"}}"));
        assertEquals("Not Found", SseStream.errorMessage("Not Found\n"));
        assertEquals("(empty body)", SseStream.errorMessage(""));
        assertEquals("{\"detail\":\"x\"}", SseStream.errorMessage("{\"detail\":\"x\"}"));
        assertEquals("bad", SseStream.errorMessage("{\"error\":\"bad\"}"));
    }
}
