// An agent on the JDK's com.sun.net.httpserver: every answer shape by path.
// Run with `java Agent.java`; prints "PORT <n>"; GET /stats -> {"acted": n}.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPOutputStream;

public class Agent {
    static final AtomicInteger acted = new AtomicInteger();

    public static void main(String[] args) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 50);
        server.createContext("/", Agent::handle);
        server.setExecutor(Executors.newCachedThreadPool());
        server.start();
        System.out.println("PORT " + server.getAddress().getPort());
        System.out.flush();
    }

    static void handle(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getPath();
        if (ex.getRequestMethod().equals("GET")) {
            send(ex, 200, "application/json", ("{\"acted\": " + acted.get() + "}").getBytes());
            return;
        }
        acted.incrementAndGet();
        String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        byte[] result = ("{\"peer\": \"java\", \"length\": " + body.length() + "}").getBytes();
        switch (path) {
            case "/json" -> send(ex, 200, "application/json", result);
            case "/chunked" -> {
                ex.getResponseHeaders().set("content-type", "application/json");
                ex.sendResponseHeaders(200, 0);  // 0: chunked
                try (OutputStream out = ex.getResponseBody()) {
                    out.write(result, 0, 4);
                    out.flush();
                    out.write(result, 4, result.length - 4);
                }
            }
            case "/empty" -> {
                ex.sendResponseHeaders(204, -1);
                ex.close();
            }
            case "/gzip" -> {
                ByteArrayOutputStream buf = new ByteArrayOutputStream();
                try (GZIPOutputStream gz = new GZIPOutputStream(buf)) { gz.write(result); }
                ex.getResponseHeaders().set("content-encoding", "gzip");
                send(ex, 200, "application/json", buf.toByteArray());
            }
            case "/deflate" -> {
                ByteArrayOutputStream buf = new ByteArrayOutputStream();
                try (DeflaterOutputStream z = new DeflaterOutputStream(buf)) { z.write(result); }
                ex.getResponseHeaders().set("content-encoding", "deflate");
                send(ex, 200, "application/json", buf.toByteArray());
            }
            case "/text" -> send(ex, 200, "text/plain; charset=utf-8", "done: 已发货".getBytes(StandardCharsets.UTF_8));
            case "/xml" -> send(ex, 200, "text/xml", "<ok>1</ok>".getBytes());
            case "/notjson" -> send(ex, 200, "application/json", "<html>oops</html>".getBytes());
            case "/big" -> send(ex, 200, "application/json", new byte[17 * 1024 * 1024]);
            case "/slow" -> {
                try { Thread.sleep(1500); } catch (InterruptedException e) { Thread.currentThread().interrupt(); }
                send(ex, 200, "application/json", result);
            }
            default -> send(ex, 404, "application/json", "{}".getBytes());
        }
    }

    static void send(HttpExchange ex, int status, String type, byte[] body) throws IOException {
        ex.getResponseHeaders().set("content-type", type);
        ex.sendResponseHeaders(status, body.length);
        try (OutputStream out = ex.getResponseBody()) { out.write(body); }
    }
}
