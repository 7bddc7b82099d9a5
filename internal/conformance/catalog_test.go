package conformance

import "fmt"

// The catalog: one case per test method of Debezium's
// debezium-connect-plugins/src/test/java/io/debezium/transforms/outbox/
// EventRouterTest.java and AbstractEventRouterTest.java (as run by
// debezium-connector-postgres/src/test/java/io/debezium/connector/
// postgresql/OutboxEventRouterIT.java), at debezium/debezium
// aad5519902997a3627fe296f77ea6d3452e9acce, plus issue 21's rows.
//
// Translation rules:
//
//   - EventRouterTest builds rows with Connect schemas by hand
//     (createEventRecord): id, aggregatetype, aggregateid, type and payload
//     are SchemaBuilder.string() (required, no semantic name), is_deleted
//     SchemaBuilder.bool().optional(). Debezium's Postgres connector gives
//     exactly these schemas to varchar/text NOT NULL columns and a nullable
//     boolean, so those are the column types. The id is varchar, not uuid,
//     because a uuid column's schema is named io.debezium.data.Uuid, which
//     the Java schema is not (and one test's id, "…5dd0|", is no uuid). The
//     payload is text, not jsonb, for the same reason (jsonb's schema is
//     io.debezium.data.Json) and because jsonb would reorder the keys of
//     the expand-JSON payloads. int32 → int4, bytes → bytea, a required
//     schema → NOT NULL. The unit tests' rows have no primary key (they
//     repeat ids), so the tables get REPLICA IDENTITY FULL.
//   - The IT's table is OutboxEventRouterIT's DDL (id uuid primary key,
//     varchar(255) NOT NULL columns, payload jsonb) with its ALTERs per test.
//   - Routing values carry the case's tag ({tag}: "c07." for case 7) so
//     that the cases sharing one relay land on their own topics; topics,
//     keys and envelope fields that contain the routing value carry it too.
//   - Debezium's envelope schema name is the row schema's name with the
//     routing value put before its last segment; the Postgres connector
//     names a row schema <topic.prefix>.<schema>.<table>.Value. The suite
//     uses the IT's topic.prefix, test_server (serverName).
//   - Fields a Java test does not assert are completed from
//     EventRouterDelegate.apply: key = the key column with its schema, a
//     header "id" with the id column's schema first, header placements
//     after it, the value the payload with its schema, or a struct when a
//     placement is envelope.

// serverName is Debezium's topic.prefix the expected envelope schema names
// use (the IT's TestHelper.TEST_SERVER).
const serverName = "test_server"

// envName is the envelope schema name for routing value route.
func envName(route string) string {
	return serverName + ".public.{table}." + route + ".Value"
}

// EventRouterTest's row schema (createEventRecord).
var (
	cID        = Column{"id", "varchar(255) NOT NULL", strS()}
	cAggType   = Column{"aggregatetype", "varchar(255) NOT NULL", strS()}
	cAggID     = Column{"aggregateid", "varchar(255) NOT NULL", strS()}
	cType      = Column{"type", "varchar(255) NOT NULL", strS()}
	cPayload   = Column{"payload", "text NOT NULL", strS()}
	cIsDeleted = Column{"is_deleted", "boolean", opt(boolS())}
)

func ertColumns(aggID, typ, payload Column, extra ...Column) []Column {
	return append([]Column{cID, cAggType, aggID, typ, payload, cIsDeleted}, extra...)
}

// createEventRecord's default arguments.
const (
	dfID      = "da8d6de6-3b77-45ff-8f44-57db55a7a06c"
	dfType    = "UserCreated"
	dfAggID   = "10711fa5"
	dfAggType = "{tag}User"
	dfPayload = "{}"
)

// ertRow is createEventRecord(eventId, eventType, payloadId, payloadType, payload).
func ertRow(id string, typ, aggID any, aggType string, payload any, extra ...any) Row {
	r := Row{"id": id, "type": typ, "aggregateid": aggID, "aggregatetype": aggType, "payload": payload}
	for i := 0; i < len(extra); i += 2 {
		r[extra[i].(string)] = extra[i+1]
	}
	return r
}

func defaultRow() Row { return ertRow(dfID, dfType, dfAggID, dfAggType, dfPayload) }

// plain is the record Debezium's router makes without envelope
// placements: topic outbox.event.<aggregatetype>, key aggregateid, value
// the payload, header id; with the schemas of the given columns.
func plain(step int, r Row, key, payload Column) Record {
	return Record{
		Step:      step,
		Topic:     "outbox.event." + r["aggregatetype"].(string),
		KeySchema: key.Schema, Key: r[key.Name],
		ValueSchema: payload.Schema, Value: r[payload.Name],
		Headers: []Header{{"id", strS(), r["id"]}},
	}
}

func ptr[T any](v T) *T { return &v }

// The OutboxEventRouterIT table and its ALTERs.
var (
	itID          = Column{"id", "uuid NOT NULL PRIMARY KEY", uuidS()}
	itAggType     = Column{"aggregatetype", "varchar(255) NOT NULL", strS()}
	itAggID       = Column{"aggregateid", "varchar(255) NOT NULL", strS()}
	itType        = Column{"type", "varchar(255) NOT NULL", strS()}
	itPayload     = Column{"payload", "jsonb", optJSONS()}
	itVersion     = Column{"version", "int NOT NULL", i32S()}
	itBool        = Column{"somebooltype", "boolean NOT NULL", boolS()}
	itCreatedAt   = Column{"createdat", "timestamp without time zone NOT NULL", &Schema{Type: "int64", Name: "io.debezium.time.MicroTimestamp", Version: 1}}
	itIsDeleted   = Column{"is_deleted", "boolean DEFAULT false", &Schema{Type: "boolean", Optional: true, Default: false}}
	itPayloadText = Column{"payload", "varchar(1000)", optStrS()} // alterTableModifyPayload
)

func itColumns(payload Column, extra ...Column) []Column {
	return append([]Column{itID, itAggType, itAggID, itType, payload}, extra...)
}

// itRow is OutboxEventRouterIT.createInsert(eventId, eventType,
// aggregateType, aggregateId, payloadJson, additional).
func itRow(id, typ, aggType, aggID string, payload any, extra ...any) Row {
	r := Row{"id": id, "type": typ, "aggregatetype": aggType, "aggregateid": aggID, "payload": payload}
	for i := 0; i < len(extra); i += 2 {
		r[extra[i].(string)] = extra[i+1]
	}
	return r
}

func itPlain(step int, r Row) Record {
	return Record{
		Step:      step,
		Topic:     "outbox.event." + r["aggregatetype"].(string),
		KeySchema: strS(), Key: r["aggregateid"],
		ValueSchema: optJSONS(), Value: r["payload"],
		Headers: []Header{{"id", uuidS(), r["id"]}},
	}
}

// The IT's shouldSupportAllFeatures placements (with the alias of the
// aggregate type as each test spells it).
func itAllPlacements(aggAlias string) string {
	return "version:envelope:eventVersion,aggregatetype:envelope:" + aggAlias +
		",somebooltype:envelope:someBoolType,somebooltype:header,is_deleted:envelope:deleted"
}

func itAllSchema(route, aggAlias string) *Schema {
	s := structS(envName(route), false,
		field("payload", optJSONS()),
		field("eventVersion", i32S()),
		field(aggAlias, strS()),
		field("someBoolType", boolS()),
		field("deleted", itIsDeleted.Schema))
	s.Version = 1
	return s
}

// ts2019 is the IT's TIMESTAMP(3) '2019-03-24 20:52:59' (1553460779000 ms).
var ts2019 = TS{SQL: "TIMESTAMP(3) '2019-03-24 20:52:59'", Millis: 1553460779000}

// expand-JSON payload schemas (JsonSchemaData.toConnectSchema: objects are
// optional structs named by their path from "payload", strings, booleans
// and numbers optional, int32 for an int, float64 for a decimal; JSON
// nulls and empty arrays dropped by default).
var (
	optBoolS   = func() *Schema { return opt(boolS()) }
	optI32S    = func() *Schema { return opt(i32S()) }
	optDoubleS = func() *Schema { return &Schema{Type: "double", Optional: true} }
)

// catalog returns the cases, tagged and resolved.
func catalog() []*Case {
	cases := rawCatalog()
	for i, c := range cases {
		c.tag = fmt.Sprintf("c%02d", i+1)
		c.resolve()
	}
	return cases
}

func rawCatalog() []*Case {
	const ert, it = "EventRouterTest.", "AbstractEventRouterTest."
	ertDefault := ertColumns(cAggID, cType, cPayload)

	// expand-JSON fixtures
	petObj := structS("payload.petObjects", true, field("type", optStrS()))
	expand1 := structS("payload", true,
		field("fullName", optStrS()), field("enabled", optBoolS()), field("rating", optDoubleS()),
		field("age", optI32S()), field("pets", arrayS(optStrS())), field("petObjects", arrayS(petObj)))
	colors := structS("payload.petObjects.colors", true, field("name", optStrS()))
	// Two different element schemas are merged by JsonSchemaData.mergeSchema
	// into a builder from SchemaUtil.copySchemaBasics (Kafka's
	// connect/transforms/.../util/SchemaUtil.java), which copies name,
	// version, doc and parameters but not optional: the merged struct is
	// required. (One distinct element schema is used as it is, optional.)
	petObj2 := structS("payload.petObjects", false, field("type", optStrS()), field("colors", arrayS(colors)))
	expand2 := structS("payload", true, field("fullName", optStrS()), field("petObjects", arrayS(petObj2)))
	expand3 := structS("payload", true, field("fullName", optStrS()), field("petObjects", arrayS(petObj)))
	expand4 := structS("payload", true, field("fullName", optStrS()), field("numbers", arrayS(optI32S())))
	ean := structS("payload.attributes.eans", true, field("code", optStrS()), field("createdAt", optStrS()))
	attr := structS("payload.attributes", true, field("id", optStrS()), field("eans", arrayS(ean)),
		field("purchaseBusinessStatus", optStrS()), field("isCanBeReturnToSupplier", optBoolS()),
		field("purchaseWarehouseStatus", optStrS()))
	expand5 := structS("payload", true, field("id", optStrS()), field("attributes", arrayS(attr)))
	expandEnv := structS("payload", true, field("fullName", optStrS()))

	complex1 := `{"id":"1028cbab-c55b-4dab-a367-7d9471466a59","attributes":[{"id":"10911586","adr":null,"eans":[{"code":"2007000013656","createdAt":"2022-06-08T11:33:16.465Z"}],"purchaseBusinessStatus":"BLOCOM","isCanBeReturnToSupplier":false,"purchaseWarehouseStatus":"NONAUT"}]}`
	complex2 := `{"id":"1028cbab-c55b-4dab-a367-7d9471466a59","attributes":[{"id":"10911586","adr":null,"eans":[{"code":"2007000013656","createdAt":"2022-06-08T11:33:16.465Z"},{"code":"2000630108556","createdAt":"2022-06-23T07:57:54.717Z"}],"purchaseBusinessStatus":"BLOCOM","isCanBeReturnToSupplier":false,"purchaseWarehouseStatus":"NONAUT"}]}`
	complexValue := func(eans ...[2]string) Struct {
		var es []any
		for _, e := range eans {
			es = append(es, Struct{ean, map[string]any{"code": e[0], "createdAt": e[1]}})
		}
		return Struct{expand5, map[string]any{
			"id": "1028cbab-c55b-4dab-a367-7d9471466a59",
			"attributes": []any{Struct{attr, map[string]any{
				"id": "10911586", "eans": es, "purchaseBusinessStatus": "BLOCOM",
				"isCanBeReturnToSupplier": false, "purchaseWarehouseStatus": "NONAUT",
			}}},
		}}
	}
	ean1 := [2]string{"2007000013656", "2022-06-08T11:33:16.465Z"}
	ean2 := [2]string{"2000630108556", "2022-06-23T07:57:54.717Z"}

	// expandRecord is plain() with the expanded payload; the raw setting
	// sends the payload text as it is (the option is inert there).
	expandRecord := func(step int, r Row, s *Schema, v Struct) Record {
		w := plain(step, r, cAggID, cPayload)
		w.ValueSchema, w.Value = s, v
		w.RawValue = ptr(r["payload"].(string))
		return w
	}

	// canConfigureEveryTableField / canInfluenceTableColumnTypes /
	// canSetPartitionWithAdditionalFields options.
	everyField := func(extra map[string]string) map[string]string {
		o := map[string]string{
			"table.field.event.id":      "event_id",
			"table.field.event.key":     "payload_id",
			"table.field.event.type":    "event_type",
			"table.field.event.payload": "payload_body",
		}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	typedColumns := func(last Column) []Column {
		return []Column{
			{"event_id", "int4 NOT NULL", i32S()},
			{"payload_id", "int4 NOT NULL", i32S()},
			{"my_route_field", "varchar(255) NOT NULL", strS()},
			{"event_type", "bytea NOT NULL", bytesS()},
			{"payload_body", "bytea NOT NULL", bytesS()},
			last,
		}
	}
	typedRow := func(last string, v any) Row {
		return Row{"event_id": int32(2), "payload_id": int32(1232), "event_type": []byte("CoolSchemaCreated"),
			"my_route_field": "{tag}routename", "payload_body": []byte("{}"), last: v}
	}

	deletedCols := ertColumns(cAggID, cType, cPayload, Column{"deleted", "boolean", opt(boolS())})
	deletedRow := func(payload string) Row {
		return ertRow(dfID, dfType, dfAggID, dfAggType, payload, "is_deleted", true)
	}
	deletedStruct := structS(envName(dfAggType), false, field("payload", strS()), field("deleted", opt(boolS())))

	versionCols := ertColumns(cAggID, cType, cPayload, Column{"version", "int4 NOT NULL", i32S()})
	// versionSteps returns fresh rows: resolve rewrites them per case.
	versionSteps := func() []Step {
		return []Step{
			{Insert: ertRow("166080d9-3b0e-4a04-81fe-2058a7386f1f", dfType, "420b186d", dfAggType, "{}", "version", int32(1))},
			{Insert: ertRow("166080d9-3b0e-4a04-81fe-2058a7386f1f", dfType, "420b186d", dfAggType, "{}", "version", int32(3))},
			{Insert: ertRow("18f94a39-b931-41b7-837c-6fc23b013597", dfType, "1b10b70b", dfAggType, "{}", "version", int32(1))},
		}
	}
	versioned := func(step int, version int) Record {
		r := versionSteps()[step].Insert
		w := plain(step, r, cAggID, cPayload)
		s := structS(envName(dfAggType), false, field("payload", strS()), field("eventType", strS()))
		s.Version = version
		w.ValueSchema, w.Value = s, Struct{s, map[string]any{"payload": "{}", "eventType": dfType}}
		return w
	}

	envelopeOf := func(step int, r Row, fields ...any) Record {
		w := plain(step, r, cAggID, cPayload)
		fs := []Field{field("payload", strS())}
		vals := map[string]any{"payload": r["payload"]}
		for i := 0; i < len(fields); i += 3 {
			fs = append(fs, field(fields[i].(string), fields[i+1].(*Schema)))
			vals[fields[i].(string)] = fields[i+2]
		}
		s := structS(envName(r["aggregatetype"].(string)), false, fs...)
		w.ValueSchema, w.Value = s, Struct{s, vals}
		return w
	}

	insertThen := func(sql string) []Step {
		return []Step{{Insert: defaultRow()}, {SQL: sql}}
	}

	itAll := func(aggAlias string, payload any, deleted any) (Row, Record) {
		r := itRow("f9171eb6-19f3-4579-9206-0e179d2ebad7", "UserUpdated", "{tag}UserEmail", "7bdf2e9e", payload,
			"version", int32(1), "somebooltype", true, "createdat", ts2019, "is_deleted", deleted)
		s := itAllSchema("{tag}UserEmail", aggAlias)
		w := itPlain(0, r)
		del := deleted
		if o, ok := deleted.(Omitted); ok {
			del = o.V
		}
		w.ValueSchema = s
		w.Value = Struct{s, map[string]any{"payload": payload, "eventVersion": int32(1), aggAlias: "{tag}UserEmail", "someBoolType": true, "deleted": del}}
		w.Headers = append(w.Headers, Header{"somebooltype", boolS(), true})
		w.TSMillis = ts2019.Millis
		return r, w
	}
	allRow, allWant := itAll("aggregateType", `{"email": "gh@mefi.in"}`, Omitted{false})
	nullRow, nullWant := itAll("agregateType", nil, true)
	nullRow["id"], nullRow["aggregateid"] = "a9d76f78-bda6-48d3-97ed-13a146163218", "a9d76f78"
	nullWant.Headers[0].Value, nullWant.Key = "a9d76f78-bda6-48d3-97ed-13a146163218", "a9d76f78"
	tombRow, tombWant := itAll("aggregateType", nil, true)
	tombRow["id"], tombRow["aggregateid"] = "a9d76f78-bda6-48d3-97ed-13a146163218", "a9d76f78"
	tombWant.Headers[0].Value, tombWant.Key = "a9d76f78-bda6-48d3-97ed-13a146163218", "a9d76f78"
	tombWant.ValueSchema, tombWant.Value = nil, nil

	nonCDC := func(name string) *Case {
		return &Case{Java: ert + name, Difference: []string{"non-cdc-records"},
			Note: "feeds the router a record that is not a Debezium change event; walrelay reads only pgoutput changes of the outbox table"}
	}
	rejected := func(name, opt, val string) *Case {
		return &Case{Java: ert + name, Opts: map[string]string{opt: val}, Outcome: Rejected,
			Note: "configure() throws ConfigException; walrelay's config validation refuses the option"}
	}

	return []*Case{
		// ---- EventRouterTest.java ----
		{
			Java: ert + "canSkipTombstone", Outcome: Records,
			Columns: ertDefault, Steps: insertThen("DELETE FROM {table}"),
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
			Note: "a DELETE makes Debezium's Postgres connector emit a delete event and a tombstone (tombstones.on.delete=true), which the router drops: only the INSERT's record lands",
		},
		{
			Java: ert + "canSkipDeletion", Outcome: Records,
			Columns: ertDefault, Steps: insertThen("DELETE FROM {table}"),
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
			Note: "the delete event of a DELETE is dropped: only the INSERT's record lands",
		},
		nonCDC("canSkipMessagesWithoutDebeziumCdcEnvelopeDueToMissingSchemaName"),
		nonCDC("shouldFailWhenTheSchemaLooksValidButDoesNotHaveTheCorrectFields"),
		nonCDC("canSkipMessagesWithoutDebeziumCdcEnvelopeDueToMissingSchemaNameSuffix"),
		nonCDC("canSkipMessagesWithoutDebeziumCdcEnvelopeDueToMissingValueSchema"),
		{
			Java: ert + "canSkipUpdates", Outcome: Records,
			Columns: ertDefault, Steps: insertThen("UPDATE {table} SET type = 'UserUpdated'"),
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
			Note: "table.op.invalid.behavior=warn (default) skips the UPDATE: only the INSERT's record lands",
		},
		{
			Java: ert + "canFailOnUpdates", Outcome: Stops,
			Opts:    map[string]string{"table.op.invalid.behavior": "fatal"},
			Columns: ertDefault, Steps: insertThen("UPDATE {table} SET type = 'UserUpdated'"),
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
			Note: "fatal: the UPDATE stops the relay (Debezium: IllegalStateException); the INSERT's record may or may not have landed before",
		},
		{
			Java: ert + "canExtractTableFields", Outcome: Records,
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
			Note: `value "{}" with a string schema (no version)`,
		},
		{
			Java: ert + "canSetDefaultMessageKey", Outcome: Records,
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
			Note: `key "10711fa5", string schema`,
		},
		{
			Java: ert + "canSetMessageKey", Outcome: Records,
			Opts:    map[string]string{"table.field.event.key": "type"},
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{plain(0, defaultRow(), cType, cPayload)},
			Note: `key is the type column, "UserCreated"`,
		},
		{
			Java: ert + "failsOnInvalidSetMessageKey", Outcome: Stops,
			Opts:    map[string]string{"table.field.event.key": "fakefield"},
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Difference: []string{"fails-at-startup"},
			Note:       "the key column does not exist: Debezium throws DataException on the event, walrelay refuses to start",
		},
		{
			Java: ert + "canSetTimestampFromDebeziumEnvelopeByDefault", Outcome: Records,
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
			Note: "the record timestamp without table.field.event.timestamp; see record-timestamp",
		},
		{
			Java: ert + "canSetTimestampByUserDefinedConfiguration",
			Opts: map[string]string{"table.field.event.timestamp": "event_timestamp"},
			Columns: ertColumns(cAggID, cType, cPayload,
				Column{"event_timestamp", "timestamp(3) NOT NULL", &Schema{Type: "int64", Name: "org.apache.kafka.connect.data.Timestamp", Version: 1}}),
			Difference: []string{"timestamp-range"},
			Note:       "the Java value 14222264625338 ms is 2420-09-… UTC, past the last instant walrelay's producer can carry",
		},
		{
			Java: ert + "canRouteBasedOnField", Outcome: Records,
			Opts:    map[string]string{"route.by.field": "aggregatetype"},
			Columns: ertDefault,
			Steps: []Step{
				{Insert: defaultRow()},
				{Insert: ertRow("ab720dd3-176d-40a6-96f3-6cf961d7df6a", "UserUpdate", "10711fa5", "{tag}User", "{}")},
				{Insert: ertRow("ab720dd3-176d-40a6-96f3-6cf961d7df6a", "AddressCreated", "10711fa5", "{tag}Address", "{}")},
			},
			Want: []Record{
				plain(0, defaultRow(), cAggID, cPayload),
				plain(1, ertRow("ab720dd3-176d-40a6-96f3-6cf961d7df6a", "UserUpdate", "10711fa5", "{tag}User", "{}"), cAggID, cPayload),
				plain(2, ertRow("ab720dd3-176d-40a6-96f3-6cf961d7df6a", "AddressCreated", "10711fa5", "{tag}Address", "{}"), cAggID, cPayload),
			},
			Note: "topics outbox.event.User (twice) and outbox.event.Address",
		},
		{
			Java: ert + "canConfigureEveryTableField", Outcome: Records,
			Opts: everyField(map[string]string{"route.by.field": "payload_id"}),
			Columns: []Column{
				{"event_id", "varchar(255) NOT NULL", strS()},
				{"payload_id", "varchar(255) NOT NULL", strS()},
				{"event_type", "varchar(255) NOT NULL", strS()},
				{"payload_body", "text NOT NULL", strS()},
			},
			Steps: []Step{{Insert: Row{"event_id": "da8d6de6-3b77-45ff-8f44-57db55a7a06c", "payload_id": "{tag}10711fa5",
				"event_type": "UserCreated", "payload_body": "{}"}}},
			Want: []Record{{
				Topic: "outbox.event.{tag}10711fa5", KeySchema: strS(), Key: "{tag}10711fa5",
				ValueSchema: strS(), Value: "{}",
				Headers: []Header{{"id", strS(), "da8d6de6-3b77-45ff-8f44-57db55a7a06c"}},
			}},
			Note: "every column renamed; routed by payload_id, which is also the key (so the key carries the tag)",
		},
		{
			Java: ert + "canInfluenceTableColumnTypes", Outcome: Records,
			Opts: everyField(map[string]string{"route.by.field": "my_route_field",
				"table.fields.additional.placement": "some_boolean:envelope:bool"}),
			Columns: typedColumns(Column{"some_boolean", "boolean NOT NULL", boolS()}),
			Steps:   []Step{{Insert: typedRow("some_boolean", true)}},
			Want: func() []Record {
				s := structS(envName("{tag}routename"), false, field("payload", bytesS()), field("bool", boolS()))
				return []Record{{
					Topic: "outbox.event.{tag}routename", KeySchema: i32S(), Key: int32(1232),
					ValueSchema: s, Value: Struct{s, map[string]any{"payload": []byte("{}"), "bool": true}},
					Headers: []Header{{"id", i32S(), int32(2)}},
				}}
			}(),
			SettingDiff: map[Setting]string{SettingString: "string-bytes"},
			Note:        "int4 id and key, bytea type and payload, a boolean in the envelope",
		},
		{
			Java: ert + "canSetSchemaVersionWhenMoreThanPayloadIsInEnvelope", Outcome: Records,
			Opts: map[string]string{"table.field.event.schema.version": "version",
				"table.fields.additional.placement": "type:envelope:eventType"},
			Columns:    versionCols,
			Steps:      versionSteps(),
			Want:       []Record{versioned(0, 1), versioned(1, 3), versioned(2, 1)},
			Difference: []string{"java-identity"},
			Note:       "envelope schema versions 1, 3, 1 from the int4 version column",
		},
		{
			Java: ert + "shouldNotSetSchemaVersionByDefault", Outcome: Records,
			Opts:    map[string]string{"table.field.event.schema.version": "version"},
			Columns: versionCols,
			Steps:   versionSteps(),
			Want: []Record{plain(0, versionSteps()[0].Insert, cAggID, cPayload),
				plain(1, versionSteps()[1].Insert, cAggID, cPayload), plain(2, versionSteps()[2].Insert, cAggID, cPayload)},
			Note: "no envelope placement: the value is the payload string, without a version",
		},
		{
			Java: ert + "canSetPayloadTypeIntoTheEnvelope", Outcome: Records,
			Opts:    map[string]string{"table.fields.additional.placement": "type:envelope"},
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{envelopeOf(0, defaultRow(), "type", strS(), dfType)},
		},
		{
			Java: ert + "canSetPayloadTypeIntoTheEnvelopeWithAlias", Outcome: Records,
			Opts:    map[string]string{"table.fields.additional.placement": "type:envelope:aggregateType"},
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{envelopeOf(0, defaultRow(), "aggregateType", strS(), dfType)},
		},
		{
			Java: ert + "canSetMultipleFieldsIntoTheEnvelope", Outcome: Records,
			Opts:    map[string]string{"table.fields.additional.placement": "type:envelope:payloadType, aggregateid:envelope:payloadId,type:header:payloadType"},
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: func() []Record {
				w := envelopeOf(0, defaultRow(), "payloadType", strS(), dfType, "payloadId", strS(), dfAggID)
				w.Headers = append(w.Headers, Header{"payloadType", strS(), dfType})
				return []Record{w}
			}(),
		},
		{
			Java: ert + "canSetPartitionWithAdditionalFields", Outcome: Records,
			Opts: everyField(map[string]string{"route.by.field": "my_route_field",
				"table.fields.additional.placement": "p:partition"}),
			Columns: typedColumns(Column{"p", "int4 NOT NULL", i32S()}),
			Steps:   []Step{{Insert: typedRow("p", int32(123))}},
			Want: []Record{{
				Topic: "outbox.event.{tag}routename", KeySchema: i32S(), Key: int32(1232),
				ValueSchema: bytesS(), Value: []byte("{}"),
				Headers:   []Header{{"id", i32S(), int32(2)}},
				Partition: ptr(int32(123)),
			}},
			Topics:      map[string]int32{"outbox.event.{tag}routename": 124},
			SettingDiff: map[Setting]string{SettingString: "string-bytes"},
			Note:        "partition 123: the topic is created with 124 partitions beforehand (Kafka's producer would fail on a topic that lacks it)",
		},
		rejected("shouldFailOnInvalidConfigurationForTopicRegex", "route.topic.regex", " [[a-z]"),
		rejected("shouldFailOnInvalidConfigurationForAdditionalFields", "table.fields.additional.placement", "type"),
		{
			Java: ert + "shouldFailOnInvalidConfigurationForAdditionalFieldsEmpty",
			Opts: map[string]string{"table.fields.additional.placement": ""}, Difference: []string{"empty-placement"},
		},
		rejected("shouldFailOnInvalidConfigurationForOperationBehavior", "table.op.invalid.behavior", "invalidOption"),
		{
			Java: ert + "canPassStringKey", Outcome: Records,
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{plain(0, defaultRow(), cAggID, cPayload)},
		},
		{
			Java: ert + "canSetBinaryMessageKey", Outcome: Records,
			Opts:        map[string]string{"table.field.event.key": "type"},
			Columns:     ertColumns(cAggID, Column{"type", "bytea NOT NULL", bytesS()}, cPayload),
			Steps:       []Step{{Insert: ertRow(dfID, []byte("a UserCreated"), "Some other payload id", dfAggType, "{}")}},
			Want:        []Record{plain(0, ertRow(dfID, []byte("a UserCreated"), "Some other payload id", dfAggType, "{}"), Column{"type", "", bytesS()}, cPayload)},
			SettingDiff: map[Setting]string{SettingString: "string-bytes"},
			Note:        "bytea key (the type column)",
		},
		{
			Java: ert + "canPassBinaryKey", Outcome: Records,
			Columns:     ertColumns(Column{"aggregateid", "bytea NOT NULL", bytesS()}, cType, cPayload),
			Steps:       []Step{{Insert: ertRow(dfID, dfType, []byte("a binary key"), dfAggType, "{}")}},
			Want:        []Record{plain(0, ertRow(dfID, dfType, []byte("a binary key"), dfAggType, "{}"), Column{"aggregateid", "", bytesS()}, cPayload)},
			SettingDiff: map[Setting]string{SettingString: "string-bytes"},
			Note:        "bytea aggregateid (canPassKeyByType)",
		},
		{
			Java: ert + "canPassIntKey", Outcome: Records,
			Columns: ertColumns(Column{"aggregateid", "int4 NOT NULL", i32S()}, cType, cPayload),
			Steps:   []Step{{Insert: ertRow(dfID, dfType, int32(54321), dfAggType, "{}")}},
			Want:    []Record{plain(0, ertRow(dfID, dfType, int32(54321), dfAggType, "{}"), Column{"aggregateid", "", i32S()}, cPayload)},
			Note:    "int4 aggregateid (canPassKeyByType)",
		},
		{
			Java: ert + "canPassBinaryMessage", Outcome: Records,
			Columns:     ertColumns(cAggID, cType, Column{"payload", "bytea NOT NULL", bytesS()}),
			Steps:       []Step{{Insert: ertRow(dfID, dfType, "a key", dfAggType, []byte("a binary message"))}},
			Want:        []Record{plain(0, ertRow(dfID, dfType, "a key", dfAggType, []byte("a binary message")), cAggID, Column{"payload", "", bytesS()})},
			SettingDiff: map[Setting]string{SettingString: "string-bytes"},
			Note:        "bytea payload",
		},
		{
			Java: ert + "canMarkAnEventAsDeleted", Outcome: Records,
			Opts: map[string]string{"table.fields.additional.placement": "is_deleted:envelope:deleted",
				"route.tombstone.on.empty.payload": "true"},
			Columns: deletedCols,
			Steps:   []Step{{Insert: deletedRow("{}")}, {Insert: deletedRow("")}},
			Want: func() []Record {
				w1 := plain(0, deletedRow("{}"), cAggID, cPayload)
				w1.ValueSchema, w1.Value = deletedStruct, Struct{deletedStruct, map[string]any{"payload": "{}", "deleted": true}}
				w2 := plain(1, deletedRow(""), cAggID, cPayload)
				w2.ValueSchema, w2.Value = nil, nil
				return []Record{w1, w2}
			}(),
			Note: `the table has the test's extra nullable boolean column "deleted" too; an empty payload with route.tombstone.on.empty.payload gives a tombstone`,
		},
		{
			Java: ert + "noTombstoneIfNotConfigured", Outcome: Records,
			Opts:    map[string]string{"table.fields.additional.placement": "is_deleted:envelope:deleted"},
			Columns: deletedCols,
			Steps:   []Step{{Insert: deletedRow("{}")}, {Insert: deletedRow("")}},
			Want: func() []Record {
				w1 := plain(0, deletedRow("{}"), cAggID, cPayload)
				w1.ValueSchema, w1.Value = deletedStruct, Struct{deletedStruct, map[string]any{"payload": "{}", "deleted": true}}
				w2 := plain(1, deletedRow(""), cAggID, cPayload)
				w2.ValueSchema, w2.Value = deletedStruct, Struct{deletedStruct, map[string]any{"payload": "", "deleted": true}}
				return []Record{w1, w2}
			}(),
		},
		{
			Java: ert + "canExpandJsonPayloadIfConfigured", Outcome: Records,
			Opts:    map[string]string{"table.expand.json.payload": "true"},
			Columns: ertDefault,
			Steps: []Step{{Insert: ertRow(dfID, dfType, dfAggID, dfAggType,
				`{"fullName": "John Doe", "enabled": true, "rating": 4.9, "age": 42, "pets": ["dog", "cat"], "petObjects": [{"type": "dog"}, {"type": "cat"}]}`)}},
			Want: []Record{expandRecord(0, ertRow(dfID, dfType, dfAggID, dfAggType,
				`{"fullName": "John Doe", "enabled": true, "rating": 4.9, "age": 42, "pets": ["dog", "cat"], "petObjects": [{"type": "dog"}, {"type": "cat"}]}`),
				expand1, Struct{expand1, map[string]any{"fullName": "John Doe", "enabled": true, "rating": 4.9, "age": int32(42),
					"pets": []any{"dog", "cat"}, "petObjects": []any{Struct{petObj, map[string]any{"type": "dog"}}, Struct{petObj, map[string]any{"type": "cat"}}}}})},
		},
		{
			Java: ert + "shouldNotWarnOnNullPayloadWhenExpandJsonPayloadEnabled", Outcome: Records,
			Opts:    map[string]string{"table.expand.json.payload": "true", "route.tombstone.on.empty.payload": "true"},
			Columns: ertColumns(cAggID, cType, Column{"payload", "text", optStrS()}),
			Steps:   []Step{{Insert: ertRow(dfID, dfType, dfAggID, dfAggType, nil)}},
			Want: func() []Record {
				w := plain(0, ertRow(dfID, dfType, dfAggID, dfAggType, nil), cAggID, cPayload)
				w.ValueSchema = nil
				return []Record{w}
			}(),
			Difference: []string{"log-assertion"},
			Note:       "a NULL payload with expansion and tombstones: a tombstone",
		},
		{
			Java: ert + "canExpandJsonWithNestedArraysWhereFirstArrayIsEmpty", Outcome: Records,
			Opts:    map[string]string{"table.expand.json.payload": "true"},
			Columns: ertDefault,
			Steps: []Step{{Insert: ertRow(dfID, dfType, dfAggID, dfAggType,
				`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}, {"type": "cat", "colors": [{"name": "white"}]}]}`)}},
			Want: []Record{expandRecord(0, ertRow(dfID, dfType, dfAggID, dfAggType,
				`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}, {"type": "cat", "colors": [{"name": "white"}]}]}`),
				expand2, Struct{expand2, map[string]any{"fullName": "John Doe", "petObjects": []any{
					Struct{petObj2, map[string]any{"type": "dog", "colors": []any{}}},
					Struct{petObj2, map[string]any{"type": "cat", "colors": []any{Struct{colors, map[string]any{"name": "white"}}}}},
				}}})},
			Note: "the element schemas {type} and {type, colors} merge into a required {type, colors} (JsonSchemaData.mergeSchema); the empty array stays an empty array in the value",
		},
		{
			Java: ert + "shouldExpandJSONPayloadWithEmptyArrayAndRemoveThatArray", Outcome: Records,
			Opts:    map[string]string{"table.expand.json.payload": "true"},
			Columns: ertDefault,
			Steps: []Step{{Insert: ertRow(dfID, dfType, dfAggID, dfAggType,
				`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}]}`)}},
			Want: []Record{expandRecord(0, ertRow(dfID, dfType, dfAggID, dfAggType,
				`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}]}`),
				expand3, Struct{expand3, map[string]any{"fullName": "John Doe", "petObjects": []any{Struct{petObj, map[string]any{"type": "dog"}}}}})},
		},
		{
			Java: ert + "shouldNotExpandJSONPayloadIfNotConfigured", Outcome: Records,
			Columns: ertDefault,
			Steps:   []Step{{Insert: ertRow(dfID, dfType, dfAggID, dfAggType, `{"fullName": "John Doe", "rating": 4.9, "age": 42}`)}},
			Want:    []Record{plain(0, ertRow(dfID, dfType, dfAggID, dfAggType, `{"fullName": "John Doe", "rating": 4.9, "age": 42}`), cAggID, cPayload)},
		},
		{
			Java: ert + "canExpandJsonPayloadWithAdditionalFieldInEnvelope", Outcome: Records,
			Opts:    map[string]string{"table.expand.json.payload": "true", "table.fields.additional.placement": "type:envelope"},
			Columns: ertDefault,
			Steps:   []Step{{Insert: ertRow(dfID, dfType, dfAggID, dfAggType, `{"fullName": "John Doe"}`)}},
			Want: func() []Record {
				w := plain(0, ertRow(dfID, dfType, dfAggID, dfAggType, `{"fullName": "John Doe"}`), cAggID, cPayload)
				s := structS(envName(dfAggType), false, field("payload", expandEnv), field("type", strS()))
				w.ValueSchema = s
				w.Value = Struct{s, map[string]any{"payload": Struct{expandEnv, map[string]any{"fullName": "John Doe"}}, "type": dfType}}
				w.RawValue = ptr(`{"payload":"{\"fullName\": \"John Doe\"}","type":"UserCreated"}`)
				return []Record{w}
			}(),
			Note: "the raw envelope carries the text payload as a JSON string (expansion is inert in raw)",
		},
		{
			Java: ert + "canExpandJsonArrayWithFirstElementNull", Outcome: Records,
			Opts:    map[string]string{"table.expand.json.payload": "true"},
			Columns: ertDefault,
			Steps:   []Step{{Insert: ertRow(dfID, dfType, dfAggID, dfAggType, `{"fullName": "John Doe", "numbers": [null, 2, 3]}`)}},
			Want: []Record{expandRecord(0, ertRow(dfID, dfType, dfAggID, dfAggType, `{"fullName": "John Doe", "numbers": [null, 2, 3]}`),
				expand4, Struct{expand4, map[string]any{"fullName": "John Doe", "numbers": []any{nil, int32(2), int32(3)}}})},
		},
		{
			Java: ert + "canExpandJsonArrayWithComplexElements", Outcome: Records,
			Opts:    map[string]string{"table.expand.json.payload": "true"},
			Columns: ertDefault,
			Steps: []Step{
				{Insert: ertRow("59875832-7f44-11ed-954e-1a5354ab5dd0|", dfType, "6a3f12a0", dfAggType, complex1)},
				{Insert: ertRow("59875832-7f44-11ed-954e-1a5354ab5dd0|", dfType, "6a3f12a0", dfAggType, complex2)},
			},
			Want: []Record{
				expandRecord(0, ertRow("59875832-7f44-11ed-954e-1a5354ab5dd0|", dfType, "6a3f12a0", dfAggType, complex1), expand5, complexValue(ean1)),
				expandRecord(1, ertRow("59875832-7f44-11ed-954e-1a5354ab5dd0|", dfType, "6a3f12a0", dfAggType, complex2), expand5, complexValue(ean1, ean2)),
			},
			Note: `"adr": null is dropped from the schema (table.json.payload.null.behavior=ignore); both records share one schema`,
		},
		{
			Java: ert + "canSetFieldIntoTheEnvelopeWithMissingField", Outcome: Records,
			Opts: map[string]string{"table.fields.additional.placement": "nonExistingField:envelope:alias",
				"table.field.additional.missing": "ignore"},
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Want: []Record{envelopeOf(0, defaultRow())},
			Note: "an envelope placement makes the value a struct even when its column is missing and ignored: {payload} only (EventRouterDelegate: onlyHeadersInOutputMessage is false)",
		},
		{
			Java: ert + "shouldFailOnMissingField", Outcome: Stops,
			Opts:    map[string]string{"table.fields.additional.placement": "nonExistingField:envelope:alias"},
			Columns: ertDefault, Steps: []Step{{Insert: defaultRow()}},
			Difference: []string{"fails-at-startup"},
		},

		// ---- AbstractEventRouterTest.java, run by OutboxEventRouterIT ----
		{
			Java: it + "shouldConsumeRecordsFromInsert", Outcome: Records,
			Columns:    itColumns(itPayload),
			Steps:      []Step{{Insert: itRow("59a42efd-b015-44a9-9dde-cb36d9002425", "UserCreated", "{tag}User", "10711fa5", "{}")}},
			Want:       []Record{itPlain(0, itRow("59a42efd-b015-44a9-9dde-cb36d9002425", "UserCreated", "{tag}User", "10711fa5", "{}"))},
			Difference: []string{"initial-snapshot", "context-headers"},
		},
		{
			Java: it + "shouldSendEventTypeAsHeader", Outcome: Records,
			Opts:    map[string]string{"table.fields.additional.placement": "type:header:eventType"},
			Columns: itColumns(itPayload),
			Steps:   []Step{{Insert: itRow("59a42efd-b015-44a9-9dde-cb36d9002425", "UserCreated", "{tag}User", "10711fa5", `{"email": "gh@mefi.in"}`)}},
			Want: func() []Record {
				w := itPlain(0, itRow("59a42efd-b015-44a9-9dde-cb36d9002425", "UserCreated", "{tag}User", "10711fa5", `{"email": "gh@mefi.in"}`))
				w.Headers = append(w.Headers, Header{"eventType", strS(), "UserCreated"})
				return []Record{w}
			}(),
			Difference: []string{"initial-snapshot", "context-headers"},
		},
		{
			Java: it + "shouldSendEventTypeAsValue", Outcome: Records,
			Opts:    map[string]string{"table.fields.additional.placement": "type:envelope:eventType"},
			Columns: itColumns(itPayload),
			Steps:   []Step{{Insert: itRow("d4da2428-8b19-11ea-bc55-0242ac130003", "UserCreated", "{tag}User", "9948fcad", `{"email": "gh@mefi.in"}`)}},
			Want: func() []Record {
				w := itPlain(0, itRow("d4da2428-8b19-11ea-bc55-0242ac130003", "UserCreated", "{tag}User", "9948fcad", `{"email": "gh@mefi.in"}`))
				s := structS(envName("{tag}User"), false, field("payload", optJSONS()), field("eventType", strS()))
				w.ValueSchema, w.Value = s, Struct{s, map[string]any{"payload": `{"email": "gh@mefi.in"}`, "eventType": "UserCreated"}}
				return []Record{w}
			}(),
			Difference: []string{"initial-snapshot", "context-headers"},
		},
		{
			Java: it + "shouldRespectJsonFormatAsString", Outcome: Records,
			Columns:    itColumns(itPayload),
			Steps:      []Step{{Insert: itRow("f9171eb6-19f3-4579-9206-0e179d2ebad7", "UserCreated", "{tag}User", "7bdf2e9e", `{"email": "gh@mefi.in"}`)}},
			Want:       []Record{itPlain(0, itRow("f9171eb6-19f3-4579-9206-0e179d2ebad7", "UserCreated", "{tag}User", "7bdf2e9e", `{"email": "gh@mefi.in"}`))},
			Difference: []string{"initial-snapshot", "context-headers"},
		},
		{
			Java: it + "shouldSupportAllFeatures", Outcome: Records,
			Opts: map[string]string{"table.field.event.schema.version": "version", "table.field.event.timestamp": "createdat",
				"table.fields.additional.placement": itAllPlacements("aggregateType")},
			Columns:    itColumns(itPayload, itVersion, itBool, itCreatedAt, itIsDeleted),
			Steps:      []Step{{Insert: allRow}},
			Want:       []Record{allWant},
			Difference: []string{"context-headers"},
			Note:       "is_deleted is left to its DEFAULT false, which is also its schema's default",
		},
		{
			Java: it + "shouldConvertMicrosecondsTimestampToMilliseconds", Outcome: Records,
			Opts:    map[string]string{"table.field.event.timestamp": "createdat"},
			Columns: itColumns(itPayload, itCreatedAt),
			Steps: []Step{{Insert: itRow("f9171eb6-19f3-4579-9206-0e179d2ebad7", "UserUpdated", "{tag}UserEmail", "7bdf2e9e", `{"email": "gh@mefi.in"}`,
				"createdat", TS{SQL: "TIMESTAMP '2019-03-24 20:52:59'", Millis: 1553460779000})}},
			Want: func() []Record {
				w := itPlain(0, itRow("f9171eb6-19f3-4579-9206-0e179d2ebad7", "UserUpdated", "{tag}UserEmail", "7bdf2e9e", `{"email": "gh@mefi.in"}`))
				w.TSMillis = 1553460779000
				return []Record{w}
			}(),
			Difference: []string{"context-headers"},
		},
		{
			Java: it + "shouldNotProduceTombstoneEventForNullPayload", Outcome: Records,
			Opts: map[string]string{"table.field.event.schema.version": "version", "table.field.event.timestamp": "createdat",
				"table.fields.additional.placement": itAllPlacements("agregateType")},
			Columns:    itColumns(itPayload, itVersion, itBool, itCreatedAt, itIsDeleted),
			Steps:      []Step{{Insert: nullRow}},
			Want:       []Record{nullWant},
			Difference: []string{"context-headers"},
		},
		{
			Java: it + "shouldProduceTombstoneEventForNullPayload", Outcome: Records,
			Opts: map[string]string{"table.field.event.schema.version": "version", "table.field.event.timestamp": "createdat",
				"route.tombstone.on.empty.payload": "true", "table.fields.additional.placement": itAllPlacements("aggregateType")},
			Columns:    itColumns(itPayload, itVersion, itBool, itCreatedAt, itIsDeleted),
			Steps:      []Step{{Insert: tombRow}},
			Want:       []Record{tombWant},
			Difference: []string{"context-headers"},
		},
		{
			Java: it + "shouldProduceTombstoneEventForEmptyPayload", Outcome: Records,
			Opts:    map[string]string{"route.tombstone.on.empty.payload": "true"},
			Columns: itColumns(itPayloadText),
			Steps:   []Step{{Insert: itRow("a9d76f78-bda6-48d3-97ed-13a146163218", "UserUpdated", "{tag}UserEmail", "a9d76f78", "")}},
			Want: func() []Record {
				w := itPlain(0, itRow("a9d76f78-bda6-48d3-97ed-13a146163218", "UserUpdated", "{tag}UserEmail", "a9d76f78", ""))
				w.ValueSchema, w.Value = nil, nil
				return []Record{w}
			}(),
			Difference: []string{"context-headers"},
			Note:       "payload altered to varchar(1000) (alterTableModifyPayload); '' gives a tombstone",
		},

		// ---- issue 21's table ----
		{
			Java: "Issue21.aggOneJsonbA1", Outcome: Records,
			Columns: itColumns(itPayload),
			Steps:   []Step{{Insert: itRow("8e0a2b8e-6b4c-4a86-9c55-0e2f1d2a7b11", "Happened", "{tag}order", "agg-1", `{"a": 1}`)}},
			Want:    []Record{itPlain(0, itRow("8e0a2b8e-6b4c-4a86-9c55-0e2f1d2a7b11", "Happened", "{tag}order", "agg-1", `{"a": 1}`))},
			Note:    "aggregateid varchar NOT NULL agg-1, jsonb {\"a\": 1}: the keys and values of issue 21's table (TestModelBytes pins the model to its bytes) on 6 partitions: raw/string partition 3, json without schemas 0, with schemas 4 (TestMurmur2)",
		},
	}
}
