// Writes what Debezium's outbox router makes of each JSON payload of
// expand.in ("<null behavior> <empty array behavior>\t<json>"), one line
// each: "=" and the schema and value through Kafka's JsonConverter (with
// schemas); "schema!" and the exception where Debezium keeps the string
// (parsing and JsonSchemaData.toConnectSchema, as EventRouterDelegate
// calls them); "data!" and the exception where toConnectData fails after
// the schema was inferred. Compiled by gen.sh against Debezium's own
// JsonSchemaData.java.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.debezium.schema.FieldNameSelector;
import io.debezium.schema.SchemaNameAdjuster;
import io.debezium.transforms.outbox.EventRouterConfigDefinition.JsonPayloadEmptyArrayBehavior;
import io.debezium.transforms.outbox.EventRouterConfigDefinition.JsonPayloadNullFieldBehavior;
import io.debezium.transforms.outbox.JsonSchemaData;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.json.JsonConverter;

public class ExpandGolden {
    public static void main(String[] args) throws Exception {
        JsonConverter json = new JsonConverter(false);
        json.configure(Map.of(), false);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            int tab = line.indexOf('\t');
            String[] behaviors = line.substring(0, tab).split(" ");
            String text = line.substring(tab + 1);
            JsonSchemaData data = new JsonSchemaData(JsonPayloadNullFieldBehavior.parse(behaviors[0]),
                    JsonPayloadEmptyArrayBehavior.parse(behaviors[1]),
                    FieldNameSelector.defaultNonRelationalSelector(SchemaNameAdjuster.NO_OP));
            JsonNode node;
            Schema schema;
            try {
                if (!text.startsWith("{") && !text.startsWith("[")) {
                    throw new Exception("Unable to parse payload starting with '" + text.charAt(0) + "'");
                }
                node = new ObjectMapper().readTree(text);
                schema = data.toConnectSchema("payload", node);
            } catch (Exception e) {
                System.out.println("schema!" + e.getClass().getSimpleName() + ": " + e.getMessage().split("\n")[0]);
                continue;
            }
            Object value;
            try {
                value = data.toConnectData(node, schema);
            } catch (Exception e) {
                System.out.println("data!" + e.getClass().getSimpleName() + ": " + e.getMessage());
                continue;
            }
            System.out.println("=" + new String(json.fromConnectData("t", schema, value), StandardCharsets.UTF_8));
        }
    }
}
