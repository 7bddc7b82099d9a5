// Package outbox writes outbox events from an application, in the
// application's own transaction, in the form walrelay relays: either as a
// row of the outbox table (StyleRow) or as a transactional logical
// decoding message (StyleMessage, the table-less outbox).
//
// In: a Config naming the table and its columns (Debezium's defaults) or
// the message prefix, and Events. Out: one INSERT, or one
// pg_logical_emit_message(true, prefix, content) call, in the caller's
// transaction, and the event's id. Either commits with the business
// change or not at all; walrelay publishes it only once it committed.
//
// A message's content is one JSON object whose keys are the outbox column
// names the relay's router is configured with (id, aggregatetype,
// aggregateid, type, payload, ...): a string value is the column's text,
// the payload key holds the payload's JSON itself, an absent key is NULL.
// A row and a message built from the same Event are routed alike: same
// topic, key and headers, and the same value up to whitespace (a jsonb
// column stores the payload normalized, a message carries it as given).
//
// It does not connect, retry, or read anything back, and imports no
// walrelay package: an application depends on this package and pgx only.
//
// Usage, with pgx:
//
//	w, err := outbox.New(outbox.Config{}) // rows in public.outbox, Debezium's column names (what outbox.Emit does)
//	if err != nil { ... }
//	tx, err := pool.Begin(ctx)
//	if err != nil { ... }
//	defer tx.Rollback(ctx)
//	if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'paid' WHERE id = $1`, orderID); err != nil { ... }
//	id, err := w.Emit(ctx, tx, outbox.Event{
//		AggregateType: "order",              // topic outbox.event.order
//		AggregateID:   orderID,              // record key: per-order commit order
//		Type:          "OrderPaid",          // sent where router table.fields.additional.placement puts it
//		Payload:       []byte(`{"orderId":"o-1"}`), // record value
//	})
//	if err != nil { ... }
//	return tx.Commit(ctx)
//
// The table-less outbox (walrelay's outbox.message_prefix must be the
// same prefix; Postgres 14 or later):
//
//	w, err := outbox.New(outbox.Config{Style: outbox.StyleMessage, Prefix: "outbox"})
//
// With database/sql (pgx's stdlib driver), call EmitSQL with the *sql.Tx.
//
// Event ids are UUID version 7 when the caller leaves Event.ID empty:
// random enough to be unique without coordination, and ordered by creation
// time to the millisecond, so the outbox's and every consumer inbox's
// primary-key index takes them at its right edge instead of at random
// pages (the cost of UUID version 4 in a large B-tree). A v7 id tells the
// event's creation time, which its record carries anyway.
package outbox
