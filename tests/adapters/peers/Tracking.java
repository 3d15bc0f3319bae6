// A Java parcel-tracking service on com.sun.net.httpserver: a query-string JSON endpoint
// and a form-encoded legacy endpoint answering XML. It counts the calls it serves.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

public class Tracking {
    static final AtomicInteger trackCalls = new AtomicInteger();
    static final AtomicInteger pointsCalls = new AtomicInteger();

    static Map<String, String> form(String encoded) {
        Map<String, String> values = new HashMap<>();
        if (encoded == null || encoded.isEmpty()) return values;
        for (String pair : encoded.split("&")) {
            String[] kv = pair.split("=", 2);
            values.put(URLDecoder.decode(kv[0], StandardCharsets.UTF_8),
                       kv.length > 1 ? URLDecoder.decode(kv[1], StandardCharsets.UTF_8) : "");
        }
        return values;
    }

    static void answer(HttpExchange ex, int status, String type, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", type);
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) { out.write(bytes); }
    }

    static String xmlEscape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;");
    }

    static String jsonEscape(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    public static void main(String[] args) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/health", ex -> answer(ex, 200, "application/json", "{\"ok\":true}"));
        server.createContext("/calls", ex -> answer(ex, 200, "application/json",
            "{\"track\":" + trackCalls.get() + ",\"points\":" + pointsCalls.get() + "}"));
        server.createContext("/track", ex -> {
            trackCalls.incrementAndGet();
            String no = form(ex.getRequestURI().getRawQuery()).getOrDefault("no", "");
            answer(ex, 200, "application/json",
                "{\"parcel\":{\"no\":\"" + jsonEscape(no) + "\",\"where\":\"Hangzhou hub\"}}");
        });
        server.createContext("/legacy/points", ex -> {
            pointsCalls.incrementAndGet();
            Map<String, String> f = form(new String(ex.getRequestBody().readAllBytes(),
                                                    StandardCharsets.UTF_8));
            int balance = 100 + Integer.parseInt(f.getOrDefault("points", "0"));
            answer(ex, 200, "text/xml", "<result><member>" + xmlEscape(f.getOrDefault("member", ""))
                + "</member><balance>" + balance + "</balance></result>");
        });
        server.start();
        System.out.println("listening " + server.getAddress().getPort());
        System.out.flush();
    }
}
