#!/bin/sh
# Regenerates golden.txt by running Kafka Connect's and Debezium's own
# converter classes, compiled from their sources (Kafka's jars are not
# packaged here; Debian's Jackson jars are). Usage:
#   gen.sh <kafka git dir> <debezium git dir>
# e.g. gen.sh /work/.mirror/apache+kafka/repo /work/.mirror/debezium+debezium/repo
# It compiles the needed source files (javac -sourcepath picks them), with
# stubs for what would drag in the rest of kafka-clients (AppInfoParser's
# JMX metrics, client security configs, Jackson's Afterburner module,
# which JsonConverter(false) does not register) and a cut-down Utils.
set -eu
kafka=$1 debezium=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
git --git-dir="$kafka" archive HEAD connect/api/src/main/java connect/json/src/main/java \
	connect/runtime/src/main/java/org/apache/kafka/connect/converters clients/src/main/java \
	connect/transforms/src/main/java/org/apache/kafka/connect/transforms/util/SchemaUtil.java | tar x
git --git-dir="$debezium" archive HEAD debezium-connect-plugins/src/main/java/io/debezium/converters/BinaryDataConverter.java \
	debezium-connect-plugins/src/main/java/io/debezium/transforms/outbox/JsonSchemaData.java | tar x
{
	echo "# kafka $(git --git-dir="$kafka" rev-parse HEAD)"
	echo "# debezium $(git --git-dir="$debezium" rev-parse HEAD)"
} > "$work/header"
mkdir -p stub/com/fasterxml/jackson/module/afterburner stub/org/apache/kafka/common/utils stub/org/apache/kafka/common/config \
	stub/io/debezium/config stub/io/debezium/metadata stub/io/debezium stub/io/debezium/schema stub/io/debezium/util \
	stub/io/debezium/transforms/outbox
echo 'package com.fasterxml.jackson.module.afterburner; public class AfterburnerModule extends com.fasterxml.jackson.databind.module.SimpleModule {}' \
	> stub/com/fasterxml/jackson/module/afterburner/AfterburnerModule.java
echo 'package org.apache.kafka.common.utils; public class AppInfoParser { public static String getVersion() { return "stub"; } public static String getCommitId() { return "stub"; } }' \
	> stub/org/apache/kafka/common/utils/AppInfoParser.java
echo 'package org.apache.kafka.common.config; public class SslConfigs { public static void addClientSslSupport(ConfigDef c) {} }' > stub/org/apache/kafka/common/config/SslConfigs.java
echo 'package org.apache.kafka.common.config; public class SaslConfigs { public static void addClientSaslSupport(ConfigDef c) {} }' > stub/org/apache/kafka/common/config/SaslConfigs.java
# BinaryDataConverter's Debezium helpers: Field (a config key), Instantiator,
# Configuration.subset, Module.version, ConfigDescriptor.
cat > stub/io/debezium/config/Field.java <<'J'
package io.debezium.config;
import org.apache.kafka.common.config.ConfigDef;
public class Field {
    private final String name;
    private Field(String name) { this.name = name; }
    public static Field create(String name) { return new Field(name); }
    public Field withDisplayName(String s) { return this; }
    public Field withType(ConfigDef.Type t) { return this; }
    public Field withImportance(ConfigDef.Importance i) { return this; }
    public Field withDescription(String s) { return this; }
    public String name() { return name; }
    public static Set setOf(Field... fields) { return new Set(); }
    public static class Set {}
}
J
cat > stub/io/debezium/metadata/ConfigDescriptor.java <<'J'
package io.debezium.metadata;
import io.debezium.config.Field;
public interface ConfigDescriptor { Field.Set getConfigFields(); }
J
cat > stub/io/debezium/config/Configuration.java <<'J'
package io.debezium.config;
import java.util.*;
public class Configuration {
    private final Map<String, ?> map;
    private Configuration(Map<String, ?> map) { this.map = map; }
    public static Configuration from(Map<String, ?> map) { return new Configuration(map); }
    public Configuration subset(String prefix, boolean removePrefix) {
        Map<String, Object> out = new HashMap<>();
        for (Map.Entry<String, ?> e : map.entrySet())
            if (e.getKey().startsWith(prefix + ".")) out.put(e.getKey().substring(prefix.length() + 1), e.getValue());
        return new Configuration(out);
    }
    public Map<String, ?> asMap() { return map; }
}
J
cat > stub/io/debezium/config/Instantiator.java <<'J'
package io.debezium.config;
public class Instantiator {
    @SuppressWarnings("unchecked")
    public static <T> T getInstance(String className) {
        try { return (T) Class.forName(className).getDeclaredConstructor().newInstance(); }
        catch (Exception e) { throw new RuntimeException(e); }
    }
}
J
echo 'package io.debezium; public class Module { public static String version() { return "stub"; } }' > stub/io/debezium/Module.java
# JsonSchemaData's Debezium helpers, as configured by default
# (field.name.adjustment.mode=none: field names as they are).
cat > stub/io/debezium/schema/SchemaNameAdjuster.java <<'J'
package io.debezium.schema;
public interface SchemaNameAdjuster {
    String adjust(String proposedName);
    SchemaNameAdjuster NO_OP = name -> name;
}
J
cat > stub/io/debezium/schema/FieldNameSelector.java <<'J'
package io.debezium.schema;
public class FieldNameSelector {
    public interface FieldNamer<T> { String fieldNameFor(T column); }
    public static FieldNamer<String> defaultNonRelationalSelector(SchemaNameAdjuster adjuster) { return adjuster::adjust; }
}
J
cat > stub/io/debezium/util/Strings.java <<'J'
package io.debezium.util;
public class Strings {
    public static boolean isNullOrBlank(String str) { return str == null || str.trim().isEmpty(); }
}
J
git --git-dir="$debezium" show HEAD:debezium-connect-plugins/src/main/java/io/debezium/transforms/outbox/EventRouterConfigDefinition.java |
	python3 -c '
import re, sys
src = sys.stdin.read()
enums = [m.group(0) for m in re.finditer(r"    public enum (JsonPayloadNullFieldBehavior|JsonPayloadEmptyArrayBehavior) implements EnumeratedValue \{.*?\n    \}\n", src, re.S)]
assert len(enums) == 2, "enums not found"
print("package io.debezium.transforms.outbox;\npublic class EventRouterConfigDefinition {\n    public interface EnumeratedValue { String getValue(); }\n" + "".join(enums) + "}")
' > stub/io/debezium/transforms/outbox/EventRouterConfigDefinition.java
python3 - <<'PY'
import re
src = open('clients/src/main/java/org/apache/kafka/common/utils/Utils.java').read().split('\n')
want = {'toArray', 'toNullableArray', 'newInstance', 'loadClass', 'readBytes', 'mkEntry', 'mkMap', 'closeQuietly',
        'castToStringObjectMap', 'isBlank', 'enumOptions', 'entriesWithPrefix'}
body, i = [], 0
while i < len(src):
    m = re.match(r'\s+public static .*?\b(\w+)\(', src[i])
    if m and m.group(1) in want:
        j = i
        while j > 0 and src[j - 1].strip().startswith('@'):
            j -= 1
        blk, depth, k, started = src[j:i], 0, i, False
        while True:
            blk.append(src[k]); depth += src[k].count('{') - src[k].count('}')
            started = started or '{' in src[k]
            if started and depth == 0:
                break
            k += 1
        body += blk; i = k + 1; continue
    i += 1
imports = [l for l in src if l.startswith('import ')]
code = ('package org.apache.kafka.common.utils;\n' + '\n'.join(imports) +
        '\npublic final class Utils {\n    public static final String NL = System.lineSeparator();\n' +
        '    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(Utils.class);\n' +
        '\n'.join(body).replace('Utils.getContextOrKafkaClassLoader()', 'Thread.currentThread().getContextClassLoader()') + '\n}\n')
open('stub/org/apache/kafka/common/utils/Utils.java', 'w').write(code)
PY
J=/usr/share/java
CP=$J/jackson-core.jar:$J/jackson-databind.jar:$J/jackson-annotations.jar:$J/slf4j-api.jar
cp "$here/Golden.java" "$here/ExpandGolden.java" .
javac -nowarn -d out -cp "$CP" \
	-sourcepath stub:connect/api/src/main/java:connect/json/src/main/java:clients/src/main/java:connect/runtime/src/main/java:connect/transforms/src/main/java:debezium-connect-plugins/src/main/java \
	Golden.java ExpandGolden.java
{
	cat header
	echo "# java $(java -XshowSettings:properties -version 2>&1 | sed -n 's/.*java.version = //p'), jackson $(basename "$(readlink -f $J/jackson-databind.jar)")"
	java -cp "out:$CP:$J/slf4j-nop.jar" Golden
} > "$here/golden.txt"
java -cp "out:$CP:$J/slf4j-nop.jar" ExpandGolden < "$here/expand.in" > "$here/expand.golden"
