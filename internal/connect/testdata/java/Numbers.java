// Writes Java's Double.toString / Float.toString of each input and what
// Jackson writes for the same number as a tree node (DoubleNode, FloatNode)
// through a plain ObjectMapper, as Kafka Connect's JsonConverter does.
// Input: one number a line, "d <16 hex digits>" (double bits) or
// "f <8 hex digits>" (float bits). Output: toString, a tab, Jackson's bytes.
// Regenerate numbers.golden with (Debian: libjackson2-databind-java):
//   J=/usr/share/java; java -cp $J/jackson-core.jar:$J/jackson-databind.jar:$J/jackson-annotations.jar \
//     Numbers.java < numbers.in > numbers.golden
// The checked-in golden file records the JVM that wrote it on its first line.
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

public class Numbers {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        JsonNodeFactory nodes = new JsonNodeFactory(true);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        System.out.println("# java.version=" + System.getProperty("java.version"));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split(" ");
            String text;
            byte[] json;
            if (f[0].equals("d")) {
                double d = Double.longBitsToDouble(Long.parseUnsignedLong(f[1], 16));
                text = Double.toString(d);
                json = mapper.writeValueAsBytes(nodes.numberNode(d));
            } else {
                float x = Float.intBitsToFloat(Integer.parseUnsignedInt(f[1], 16));
                text = Float.toString(x);
                json = mapper.writeValueAsBytes(nodes.numberNode(x));
            }
            System.out.println(text + "\t" + new String(json, StandardCharsets.UTF_8));
        }
    }
}
