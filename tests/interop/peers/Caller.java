// A caller on the JDK's java.net.http.HttpClient with its defaults (HTTP/2 preferred:
// a POST over plain http carries `Connection: Upgrade, HTTP2-Settings` and `Upgrade: h2c`).
// `java Caller.java <coordinator URL> <capability> <agent endpoint>`: registers an agent,
// invokes the capability, prints "<status> <body>" per request.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Caller {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newHttpClient();
        String registration = "{\"id\": \"java-caller-agent\", \"capabilities\": [\"" + args[1]
            + "\"], \"transport\": {\"type\": \"http\", \"endpoint\": \"" + args[2] + "\"}}";
        String invoke = "{\"capability\": \"" + args[1] + "\", \"payload\": {\"from\": \"java\"}}";
        for (String[] call : new String[][] {{"/v1/agents", registration}, {"/v1/invoke", invoke}}) {
            HttpRequest request = HttpRequest.newBuilder(URI.create(args[0] + call[0]))
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(call[1]))
                .build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            System.out.println(response.statusCode() + " " + response.body());
        }
    }
}
