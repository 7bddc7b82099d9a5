// Package schemareg is walrelay's Confluent Schema Registry client: the
// registry's id for an Avro schema under a subject (registered, looked up,
// or the subject's latest), a subject's registered schemas for encoding JSON
// payloads with them (issue 36 item 3), and the registry's state for
// `walrelay check`. It is the only package that imports franz-go's pkg/sr.
//
// In: a Config (URLs, basic auth or a bearer token, TLS, timeouts, backoff,
// a logger, Hooks for metrics), subjects and schema texts. Out: schema ids
// (cached per subject, schema text and Mode: a hit takes no lock and
// allocates nothing), Registered schemas (the latest cached for
// Config.LatestTTL, a given version forever), a check Report, and errors
// of two kinds:
//
//   - the registry is unavailable (transport error, timeout, 408, 429, 5xx)
//     or refuses the credentials (401, 403, or a TLS certificate refused
//     either way): ID and Schema wait, retrying
//     with capped exponential backoff until their context is done
//     (backpressure: the stream waits, Postgres keeps the WAL), logging at
//     most every 10s and telling Hooks.Waiting; the error they return then
//     wraps the context's error;
//   - the registry refuses the request (409 incompatible, whatever its
//     error_code, 40901 included; 422 invalid schema or READONLY subject;
//     404 not registered on a lookup; any other 4xx) with its
//     {"error_code":...} body: a *RejectedError matching ErrRejected, with
//     the registry's own message, which the relay handles as the
//     schema_rejected error class (relay.on_error). A 4xx without that body
//     is not the registry's answer (a proxy's 404 for a wrong URL path)
//     and is waited out as unavailable.
//
// Classification is by HTTP status, never by the registry's error_code:
// registries before schema-registry commit ef43652bfec answer 409 with
// error_code 409, newer ones with 40901 (core
// rest/exceptions/Errors.java), which pkg/sr v1.8.0 does not know
// (errors.go codeToError). Confluent's serializer draws the same line
// (schema-serializer AbstractKafkaSchemaSerDe.toKafkaException: 408, 5xx
// retriable; 401/403 authentication; the rest a SerializationException);
// walrelay waits on 401/403 too instead of failing, so that fixing the
// credentials resumes the stream without a loss (docs/design/avro.md §3).
//
// Secrets never appear in logs or errors: credentials in a URL's user info
// are moved to basic auth and removed from the URL before pkg/sr sees it
// (its errors name the URL), and UserInfo and BearerToken are never
// formatted.
//
// It does not derive schemas from Connect schemas (internal/connect/avro
// does), encode records, patch ids into records (the relay does), or read
// secrets from files (internal/config does).
package schemareg
