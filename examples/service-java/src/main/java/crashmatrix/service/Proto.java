package crashmatrix.service;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Set;

/**
 * The service side of crashmatrix's service protocol (crashmatrix-service/1,
 * docs/service-protocol.md): newline-delimited JSON on stdin and stdout, one
 * request at a time, callbacks (at, model, now, sleep, store) answered in
 * line, events sent without an answer.
 */
final class Proto {
    static final String PROTOCOL = "crashmatrix-service/1";
    static final Gson GSON = new GsonBuilder().disableHtmlEscaping().create();

    /** An error reply: a code of the protocol's list, definite or not. */
    static class ServiceError extends RuntimeException {
        final String code;
        final boolean definite;

        ServiceError(String code, boolean definite, String message) {
            super(message);
            this.code = code;
            this.definite = definite;
        }
    }

    /** A step failed by a {@code fail} answer: the retry policy sees it. */
    static final class Injected extends ServiceError {
        final boolean retryable;

        Injected(String point, boolean retryable) {
            super("injected", true, "fault injected at " + point + " (retryable: " + retryable + ")");
            this.retryable = retryable;
        }
    }

    private final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    private final PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
    private long reqId = -1;
    private int step;
    Set<String> windows = Set.of();

    /** Reads the next request, or null at the end of input. */
    JsonObject next() throws IOException {
        while (true) {
            String line = in.readLine();
            if (line == null) {
                return null;
            }
            if (line.isBlank()) {
                continue;
            }
            JsonObject req = JsonParser.parseString(line).getAsJsonObject();
            reqId = req.get("id").getAsLong();
            step = 0;
            return req;
        }
    }

    void send(JsonObject msg) {
        out.print(GSON.toJson(msg));
        out.print('\n');
        out.flush();
    }

    void reply(Object ok) {
        JsonObject m = new JsonObject();
        m.addProperty("id", reqId);
        m.add("ok", GSON.toJsonTree(ok));
        send(m);
    }

    void replyError(String code, boolean definite, String message) {
        JsonObject e = new JsonObject();
        e.addProperty("code", code);
        e.addProperty("definite", definite);
        e.addProperty("message", message == null ? code : message);
        JsonObject m = new JsonObject();
        m.addProperty("id", reqId);
        m.add("error", e);
        send(m);
    }

    /** Sends a callback of the request in progress and returns its answer. */
    JsonObject callback(String kind, JsonObject body) {
        step++;
        body.addProperty("step", step);
        JsonObject m = new JsonObject();
        m.addProperty("id", reqId);
        m.add(kind, body);
        send(m);
        String line;
        try {
            line = in.readLine();
        } catch (IOException e) {
            line = null;
        }
        if (line == null) {
            // End of input: stop at once, committing nothing.
            Runtime.getRuntime().halt(0);
        }
        JsonObject answer = JsonParser.parseString(line).getAsJsonObject();
        if (answer.get("id").getAsLong() != reqId || answer.get("step").getAsInt() != step) {
            throw new IllegalStateException("answer " + line + " does not match callback " + reqId + "/" + step);
        }
        return answer;
    }

    /** Declares the crash window {@code point} before the step it names. */
    void at(String point) {
        if (!windows.contains(point)) {
            throw new IllegalStateException("window " + point + " is not declared in hello");
        }
        JsonObject body = new JsonObject();
        body.addProperty("point", point);
        JsonObject answer = callback("at", body);
        String action = answer.get("action").getAsString();
        switch (action) {
            case "continue":
                return;
            case "die":
                Runtime.getRuntime().halt(137);
                return;
            case "fail":
                throw new Injected(point, answer.has("retryable") && answer.get("retryable").getAsBoolean());
            default:
                throw new IllegalStateException("unknown action " + action + " at " + point);
        }
    }

    /** Asks the harness's model for the extraction of a document. */
    JsonObject model(String space, String documentId, String operationId, String content) {
        JsonObject body = new JsonObject();
        body.addProperty("space", space);
        body.addProperty("documentId", documentId);
        body.addProperty("operationId", operationId);
        body.addProperty("content", content);
        JsonObject answer = callback("model", body);
        throwIfError(answer);
        return answer.getAsJsonObject("extraction");
    }

    /** The harness clock, unix milliseconds. */
    long now() {
        return callback("now", new JsonObject()).get("now").getAsLong();
    }

    /** Waits through the harness clock; returns the new time. */
    long sleep(long millis) {
        JsonObject body = new JsonObject();
        body.addProperty("millis", millis);
        return callback("sleep", body).get("now").getAsLong();
    }

    /** Calls one of the harness's stores (graph, locks) and returns its result. */
    JsonObject store(String op, JsonObject args) {
        JsonObject body = new JsonObject();
        body.addProperty("op", op);
        body.add("args", args);
        JsonObject answer = callback("store", body);
        throwIfError(answer);
        JsonElement ok = answer.get("ok");
        return ok == null || ok.isJsonNull() ? new JsonObject() : ok.getAsJsonObject();
    }

    /** Tells the harness what the service saw succeed. */
    void event(JsonObject event) {
        JsonObject m = new JsonObject();
        m.addProperty("id", reqId);
        m.add("event", event);
        send(m);
    }

    private static void throwIfError(JsonObject answer) {
        if (answer.has("error")) {
            JsonObject e = answer.getAsJsonObject("error");
            throw new ServiceError(e.has("code") ? e.get("code").getAsString() : "failed",
                    !e.has("definite") || e.get("definite").getAsBoolean(),
                    e.has("message") ? e.get("message").getAsString() : "store or model call failed");
        }
    }
}
