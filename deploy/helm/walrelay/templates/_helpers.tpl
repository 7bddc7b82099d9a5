{{/* The chart's name, or nameOverride. */}}
{{- define "walrelay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name, with the chart's name added
unless the release name contains it (walrelay-orders stays walrelay-orders). */}}
{{- define "walrelay.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "walrelay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "walrelay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object; walrelay.dev/slot lets dashboards and queries
tell a fleet's releases apart by slot as well as by release. */}}
{{- define "walrelay.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "walrelay.selectorLabels" . }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: relay
{{- end -}}

{{- define "walrelay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "walrelay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "walrelay.secretName" -}}
{{- default (include "walrelay.fullname" .) .Values.secrets.name -}}
{{- end -}}

{{/* Where the secret and TLS files are mounted. */}}
{{- define "walrelay.secretsDir" -}}/etc/walrelay/secrets{{- end -}}

{{/* The secrets passed as WALRELAY_*_FILE: values key, file name, variable. */}}
{{- define "walrelay.secretFiles" -}}
- {value: postgresDsn, file: postgres-dsn, env: WALRELAY_POSTGRES_DSN_FILE}
- {value: kafkaSaslPassword, file: kafka-sasl-password, env: WALRELAY_KAFKA_SASL_PASSWORD_FILE}
- {value: converterKeyBasicAuthUserInfo, file: converter-key-basic-auth-user-info, env: WALRELAY_CONVERTER_KEY_BASIC_AUTH_USER_INFO_FILE}
- {value: converterValueBasicAuthUserInfo, file: converter-value-basic-auth-user-info, env: WALRELAY_CONVERTER_VALUE_BASIC_AUTH_USER_INFO_FILE}
- {value: converterKeyBearerAuthToken, file: converter-key-bearer-auth-token, env: WALRELAY_CONVERTER_KEY_BEARER_AUTH_TOKEN_FILE}
- {value: converterValueBearerAuthToken, file: converter-value-bearer-auth-token, env: WALRELAY_CONVERTER_VALUE_BEARER_AUTH_TOKEN_FILE}
{{- end -}}

{{/* walrelay.yaml: .Values.config with what the chart owns laid over it.
It fails on a secret written into the config: secrets come from files. */}}
{{- define "walrelay.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $pg := get $cfg "postgres" | default dict -}}
{{- if hasKey $pg "dsn" -}}
{{- fail "config.postgres.dsn holds a password: put the DSN in the Secret (secrets.postgresDsn) instead" -}}
{{- end -}}
{{- $kafka := get $cfg "kafka" | default dict -}}
{{- if hasKey (get $kafka "sasl" | default dict) "password" -}}
{{- fail "config.kafka.sasl.password is a secret: put it in the Secret (secrets.kafkaSaslPassword) instead" -}}
{{- end -}}
{{- range $k, $v := (get $cfg "converter" | default dict) -}}
{{- if or (hasSuffix "basic.auth.user.info" $k) (hasSuffix "bearer.auth.token" $k) -}}
{{- fail (printf "config.converter.%s is a secret: put it in the Secret (secrets.converter*) instead" $k) -}}
{{- end -}}
{{- end -}}
{{- $http := get $cfg "http" | default dict -}}
{{- $_ := set $http "listen" (printf "0.0.0.0:%v" .Values.metrics.port) -}}
{{- $_ := set $cfg "http" $http -}}
{{- if .Values.tls.kafka.secretName -}}
{{- $dir := printf "%s/kafka" (include "walrelay.secretsDir" .) -}}
{{- $t := dict "enabled" true "ca_file" (printf "%s/%s" $dir .Values.tls.kafka.ca) -}}
{{- if .Values.tls.kafka.cert -}}
{{- $_ := set $t "cert_file" (printf "%s/%s" $dir .Values.tls.kafka.cert) -}}
{{- $_ := set $t "key_file" (printf "%s/%s" $dir .Values.tls.kafka.key) -}}
{{- end -}}
{{- $_ := set $kafka "tls" (mergeOverwrite (get $kafka "tls" | default dict) $t) -}}
{{- $_ := set $cfg "kafka" $kafka -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* resources.limits.memory in bytes (0 when unset). Whole numbers with an
optional binary (Ki, Mi, Gi, Ti) or decimal (k, M, G, T) suffix. */}}
{{- define "walrelay.memoryLimitBytes" -}}
{{- $q := toString (dig "limits" "memory" "" (.Values.resources | default dict)) -}}
{{- if not $q -}}0{{- else -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) -}}
{{- fail (printf "resources.limits.memory %q: the chart computes GOMEMLIMIT from it and reads whole numbers with a Ki, Mi, Gi, Ti, k, M, G or T suffix; write it so, or set goMemLimitPercent: 0" $q) -}}
{{- end -}}
{{- $n := regexFind "^[0-9]+" $q | int64 -}}
{{- $unit := trimPrefix (regexFind "^[0-9]+" $q) $q -}}
{{- $mult := get (dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000) $unit | int64 -}}
{{- mul $n $mult -}}
{{- end -}}
{{- end -}}

{{/* GOMEMLIMIT in bytes, or empty when it is not set. */}}
{{- define "walrelay.goMemLimit" -}}
{{- $limit := include "walrelay.memoryLimitBytes" . | int64 -}}
{{- $pct := .Values.goMemLimitPercent | int64 -}}
{{- if and (gt $limit 0) (gt $pct 0) -}}
{{- $gml := div (mul $limit $pct) 100 -}}
{{- $inflight := dig "relay" "max_in_flight_bytes" 4194304 (.Values.config | default dict) | int64 -}}
{{- $own := add (mul 4 $inflight) 16777216 -}}
{{- if lt $gml $own -}}
{{- fail (printf "GOMEMLIMIT would be %d bytes (%d%% of resources.limits.memory), below walrelay's own soft limit of %d (4 x relay.max_in_flight_bytes + 16 MiB): raise the memory limit" $gml $pct $own) -}}
{{- end -}}
{{- $gml -}}
{{- end -}}
{{- end -}}
