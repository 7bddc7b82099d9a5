// Writes each input string as Kafka Connect's JsonConverter would: a text
// node through a plain Jackson ObjectMapper (JsonSerializer), as UTF-8.
// Input: one string per line, hex-encoded UTF-8. Output: one JSON string
// per line. Regenerate strings.golden with (Debian: libjackson2-databind-java):
//   J=/usr/share/java; java -cp $J/jackson-core.jar:$J/jackson-databind.jar:$J/jackson-annotations.jar \
//     WriteStrings.java < strings.hex > strings.golden
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.TextNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

public class WriteStrings {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        for (String line; (line = in.readLine()) != null; ) {
            String s = new String(HexFormat.of().parseHex(line), StandardCharsets.UTF_8);
            System.out.write(mapper.writeValueAsBytes(new TextNode(s)));
            System.out.write('\n');
        }
        System.out.flush();
    }
}
