{{/* Names ---------------------------------------------------------------------------- */}}

{{- define "inspection-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "inspection-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- /* The sandbox's name: "<fullname>-sandbox", within 63 characters. */}}
{{- define "inspection-gateway.sandboxName" -}}
{{- printf "%s-sandbox" (include "inspection-gateway.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "inspection-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "inspection-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inspection-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- /* Common labels; pass a dict {"ctx": $, "component": "gateway"}. */}}
{{- define "inspection-gateway.labels" -}}
helm.sh/chart: {{ include "inspection-gateway.chart" .ctx }}
{{ include "inspection-gateway.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- if .ctx.Chart.AppVersion }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: inspection-gateway
{{- end }}

{{- define "inspection-gateway.gatewaySelectorLabels" -}}
{{ include "inspection-gateway.selectorLabels" . }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "inspection-gateway.sandboxSelectorLabels" -}}
{{ include "inspection-gateway.selectorLabels" . }}
app.kubernetes.io/component: sandbox
{{- end }}

{{- define "inspection-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "inspection-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- /* repository@digest when image.digest is set (the tag is then ignored), else
repository:tag (tag default: the chart's appVersion). */}}
{{- define "inspection-gateway.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- /* The sandbox runs the same image unless sandbox.image names another (then by tag). */}}
{{- define "inspection-gateway.sandboxImage" -}}
{{- if and (not .Values.sandbox.image.repository) (not .Values.sandbox.image.tag) }}
{{- include "inspection-gateway.image" . }}
{{- else }}
{{- $repo := default .Values.image.repository .Values.sandbox.image.repository }}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.sandbox.image.tag }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}
{{- end }}

{{/* Secrets ------------------------------------------------------------------------- */}}

{{- /* Where the gateway's secret files are mounted. */}}
{{- define "inspection-gateway.secretDir" -}}/etc/inspection-gateway/secrets{{- end }}

{{- /* The Secret holding the vendor API key and webhook keys. */}}
{{- define "inspection-gateway.secretName" -}}
{{- default (include "inspection-gateway.fullname" .) .Values.secrets.existingSecret.name }}
{{- end }}

{{- /* The vendor API key the chart writes into its Secret (sandbox default included). */}}
{{- define "inspection-gateway.apiKeyValue" -}}
{{- if .Values.secrets.apiKey }}{{ .Values.secrets.apiKey }}
{{- else if .Values.sandbox.enabled }}sandbox-api-key
{{- end }}
{{- end }}

{{- define "inspection-gateway.webhookKeyValue" -}}
{{- if .Values.secrets.webhookKey }}{{ .Values.secrets.webhookKey }}
{{- else if .Values.sandbox.enabled }}sandbox-webhook-key
{{- end }}
{{- end }}

{{- /*
Secret items: a list of "secretKey=fileName" strings, one per secret the gateway gets
(API key always; the webhook keys when there are any). Returned as JSON.
*/}}
{{- define "inspection-gateway.secretItems" -}}
{{- $items := dict }}
{{- $existing := .Values.secrets.existingSecret }}
{{- if $existing.name }}
{{- $_ := set $items "api-key" $existing.apiKeyKey }}
{{- if $existing.webhookKeyKey }}{{ $_ := set $items "webhook-key" $existing.webhookKeyKey }}{{ end }}
{{- if $existing.webhookPreviousKeyKey }}{{ $_ := set $items "webhook-previous-key" $existing.webhookPreviousKeyKey }}{{ end }}
{{- else }}
{{- $_ := set $items "api-key" "api-key" }}
{{- if include "inspection-gateway.webhookKeyValue" . }}{{ $_ := set $items "webhook-key" "webhook-key" }}{{ end }}
{{- if .Values.secrets.webhookPreviousKey }}{{ $_ := set $items "webhook-previous-key" "webhook-previous-key" }}{{ end }}
{{- end }}
{{- toJson $items }}
{{- end }}

{{- /* Where the Secret of named vendor account NAME is mounted: <accountsDir>/NAME. */}}
{{- define "inspection-gateway.accountsDir" -}}/etc/inspection-gateway/accounts{{- end }}

{{- /*
Files of a vendor account's Secret volume: {"api-key": <key in its Secret>, ...}, like
secretItems. Called with the account's values.
*/}}
{{- define "inspection-gateway.accountItems" -}}
{{- $items := dict "api-key" (default "api-key" .apiKeyKey) }}
{{- if .webhookKeyKey }}{{ $_ := set $items "webhook-key" .webhookKeyKey }}{{ end }}
{{- if .webhookPreviousKeyKey }}{{ $_ := set $items "webhook-previous-key" .webhookPreviousKeyKey }}{{ end }}
{{- toJson $items }}
{{- end }}

{{- /* The webhook path of vendor account NAME (dict "name" NAME "account" VALUES). */}}
{{- define "inspection-gateway.accountWebhookPath" -}}
{{- default (printf "/webhooks/v2/%s" .name) .account.webhookPath }}
{{- end }}

{{- /* config `accounts` from vendorAccounts, as JSON: key files point into the mounts. */}}
{{- define "inspection-gateway.accountsConfig" -}}
{{- $out := dict }}
{{- range $name, $account := .Values.vendorAccounts }}
{{- $dir := printf "%s/%s" (include "inspection-gateway.accountsDir" $) $name }}
{{- $entry := dict "upstream_url" $account.upstreamUrl "api_key_file" (printf "%s/api-key" $dir) }}
{{- if $account.webhookKeyKey }}{{ $_ := set $entry "webhook_key_file" (printf "%s/webhook-key" $dir) }}{{ end }}
{{- if $account.webhookPreviousKeyKey }}{{ $_ := set $entry "webhook_previous_key_file" (printf "%s/webhook-previous-key" $dir) }}{{ end }}
{{- if $account.webhookPath }}{{ $_ := set $entry "webhook_path" $account.webhookPath }}{{ end }}
{{- if $account.registerWebhook }}{{ $_ := set $entry "register_webhook" $account.registerWebhook }}{{ end }}
{{- $_ := set $out $name $entry }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{- define "inspection-gateway.hasWebhookKey" -}}
{{- if hasKey (include "inspection-gateway.secretItems" . | fromJson) "webhook-key" }}true{{ end }}
{{- end }}

{{/* Event log ----------------------------------------------------------------------- */}}

{{- /* The scheme of the Redis event log URL: redis+sentinel with eventLog.redis.sentinel. */}}
{{- define "inspection-gateway.redisScheme" -}}
{{- ternary "redis+sentinel" "redis" (and (eq .Values.eventLog.backend "redis") .Values.eventLog.redis.sentinel.enabled) }}
{{- end }}

{{- /* The sentinels as the URL lists them: "host:port,host:port" (port default 26379). */}}
{{- define "inspection-gateway.redisSentinels" -}}
{{- $out := list }}
{{- range .Values.eventLog.redis.sentinel.hosts }}
{{- if regexMatch ":[0-9]+$" . }}
{{- $out = append $out . }}
{{- else }}
{{- $out = append $out (printf "%s:26379" .) }}
{{- end }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{- /* What follows the credentials in the Redis event log URL (no scheme, no credentials):
"host:port/db?stream=..." or, with sentinels, "host:port,host:port/MASTER/db?stream=...". */}}
{{- define "inspection-gateway.redisLocation" -}}
{{- $r := .Values.eventLog.redis }}
{{- if eq (include "inspection-gateway.redisScheme" .) "redis+sentinel" }}
{{- printf "%s/%s/%d?stream=%s" (include "inspection-gateway.redisSentinels" .) $r.sentinel.masterName (int $r.db) (urlquery $r.stream) }}
{{- else }}
{{- printf "%s:%d/%d?stream=%s" $r.host (int $r.port) (int $r.db) (urlquery $r.stream) }}
{{- end }}
{{- end }}

{{- /*
Where the sentinels' own password comes from, as JSON {"name": Secret, "key": key in it}; {}
when there is none (no sentinels, or sentinels without a password). Mounted at
sentinelSecretDir/sentinel-password, named by config redis.sentinel_password_file.
*/}}
{{- define "inspection-gateway.sentinelPasswordSecret" -}}
{{- $r := .Values.eventLog.redis }}
{{- $out := dict }}
{{- if and (eq .Values.eventLog.backend "redis") $r.sentinel.enabled }}
{{- if $r.sentinel.existingSecret.name }}
{{- $out = dict "name" $r.sentinel.existingSecret.name "key" $r.sentinel.existingSecret.passwordKey }}
{{- else if $r.sentinel.password }}
{{- $out = dict "name" (include "inspection-gateway.eventLogSecretName" .) "key" "sentinel-password" }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{- define "inspection-gateway.sentinelSecretDir" -}}/etc/inspection-gateway/redis-sentinel{{- end }}

{{- /*
How the event_log URL reaches the gateway: "config" (in the ConfigMap: SQLite, or Redis
without a password), "chartSecret" (the chart's Secret holds the URL with the password),
"existingUrl" (your Secret holds the URL), "existingPassword" (the URL is composed in the
pod from your Secret's password).
*/}}
{{- define "inspection-gateway.eventLogMode" -}}
{{- $r := .Values.eventLog.redis }}
{{- if ne .Values.eventLog.backend "redis" }}config
{{- else if $r.existingSecret.urlKey }}existingUrl
{{- else if $r.existingSecret.passwordKey }}existingPassword
{{- else if $r.password }}chartSecret
{{- else }}config
{{- end }}
{{- end }}

{{- define "inspection-gateway.eventLogSecretName" -}}
{{- printf "%s-event-log" (include "inspection-gateway.fullname" . | trunc 53 | trimSuffix "-") }}
{{- end }}

{{- /* The event_log value when it goes in the ConfigMap (no secret in it). */}}
{{- define "inspection-gateway.eventLogConfigUrl" -}}
{{- if eq .Values.eventLog.backend "redis" }}
{{- printf "%s://%s" (include "inspection-gateway.redisScheme" .) (include "inspection-gateway.redisLocation" .) }}
{{- else }}sqlite:/var/lib/inspection-gateway/events.db
{{- end }}
{{- end }}

{{- /* The URL with the password, for the chart's event-log Secret. */}}
{{- define "inspection-gateway.eventLogSecretUrl" -}}
{{- $r := .Values.eventLog.redis }}
{{- printf "%s://%s:%s@%s" (include "inspection-gateway.redisScheme" .) (urlquery $r.username) (urlquery $r.password) (include "inspection-gateway.redisLocation" .) }}
{{- end }}

{{/* Config file --------------------------------------------------------------------- */}}

{{- define "inspection-gateway.webhookPath" -}}
{{- $webhook := default dict .Values.config.webhook }}
{{- default "/webhooks/v2" $webhook.path }}
{{- end }}

{{- define "inspection-gateway.sandboxUrl" -}}
{{- printf "http://%s.%s.svc:%d" (include "inspection-gateway.sandboxName" .) .Release.Namespace (int .Values.sandbox.port) }}
{{- end }}

{{- /* The JSON config file: .Values.config plus the keys the chart manages. */}}
{{- define "inspection-gateway.configJson" -}}
{{- $cfg := deepCopy (default dict .Values.config) }}
{{- range $key, $value := $cfg }}
{{- if or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value "")) }}
{{- $_ := unset $cfg $key }}
{{- end }}
{{- end }}
{{- $dir := include "inspection-gateway.secretDir" . }}
{{- $_ := set $cfg "grpc_addr" (printf "0.0.0.0:%d" (int .Values.containerPorts.grpc)) }}
{{- $_ := set $cfg "webhook_addr" (printf "0.0.0.0:%d" (int .Values.containerPorts.webhook)) }}
{{- $_ := set $cfg "admin_addr" (printf "0.0.0.0:%d" (int .Values.containerPorts.admin)) }}
{{- $items := include "inspection-gateway.secretItems" . | fromJson }}
{{- $_ := set $cfg "api_key_file" (printf "%s/api-key" $dir) }}
{{- if hasKey $items "webhook-key" }}
{{- $_ := set $cfg "webhook_key_file" (printf "%s/webhook-key" $dir) }}
{{- end }}
{{- if hasKey $items "webhook-previous-key" }}
{{- $_ := set $cfg "webhook_previous_key_file" (printf "%s/webhook-previous-key" $dir) }}
{{- end }}
{{- if eq (include "inspection-gateway.eventLogMode" .) "config" }}
{{- $_ := set $cfg "event_log" (include "inspection-gateway.eventLogConfigUrl" .) }}
{{- end }}
{{- /* Replicas on one Redis share their idempotency keys there (the event log's Redis). */}}
{{- if and (eq .Values.eventLog.backend "redis") (not (hasKey $cfg "idempotency_store")) }}
{{- $_ := set $cfg "idempotency_store" "event_log" }}
{{- end }}
{{- if (include "inspection-gateway.sentinelPasswordSecret" . | fromJson) }}
{{- $redisCfg := deepCopy (default dict (get $cfg "redis")) }}
{{- $_ := set $redisCfg "sentinel_password_file" (printf "%s/sentinel-password" (include "inspection-gateway.sentinelSecretDir" .)) }}
{{- $_ := set $cfg "redis" $redisCfg }}
{{- end }}
{{- if .Values.vendorAccounts }}
{{- $_ := set $cfg "accounts" (include "inspection-gateway.accountsConfig" . | fromJson) }}
{{- end }}
{{- if or .Values.grpcTls.enabled (include "inspection-gateway.authzConfigMap" .) }}
{{- $grpc := deepCopy (default dict (get $cfg "grpc")) }}
{{- if .Values.grpcTls.enabled }}
{{- $tls := dict "cert_file" "/etc/inspection-gateway/grpc-tls/tls.crt" "key_file" "/etc/inspection-gateway/grpc-tls/tls.key" "refresh_interval_seconds" (int .Values.grpcTls.refreshIntervalSeconds) }}
{{- if .Values.grpcTls.clientAuth }}
{{- $_ := set $tls "client_ca_file" "/etc/inspection-gateway/grpc-tls/ca.crt" }}
{{- end }}
{{- $_ := set $grpc "tls" $tls }}
{{- end }}
{{- if include "inspection-gateway.authzConfigMap" . }}
{{- $_ := set $grpc "authz_policy_file" "/etc/inspection-gateway/authz/policy.json" }}
{{- $_ := set $grpc "authz_refresh_interval_seconds" (int .Values.authzPolicy.refreshIntervalSeconds) }}
{{- end }}
{{- $_ := set $cfg "grpc" $grpc }}
{{- end }}
{{- if .Values.sandbox.enabled }}
{{- $sandboxUrl := include "inspection-gateway.sandboxUrl" . }}
{{- $_ := set $cfg "upstream_url" $sandboxUrl }}
{{- $_ := set $cfg "webapp_url" (printf "%s/webapp" $sandboxUrl) }}
{{- /* Not with webhook.mode poll (nested or dotted): the gateway refuses register_webhook then. */}}
{{- $webhookMode := get (default dict (get $cfg "webhook")) "mode" | default (get $cfg "webhook.mode") | default "" }}
{{- if and (not (hasKey $cfg "register_webhook")) (hasKey $items "webhook-key") (ne $webhookMode "poll") }}
{{- $_ := set $cfg "register_webhook" (printf "http://%s.%s.svc:%d%s" (include "inspection-gateway.fullname" .) .Release.Namespace (int .Values.service.ports.webhook) (include "inspection-gateway.webhookPath" .)) }}
{{- end }}
{{- end }}
{{- toPrettyJson $cfg }}
{{- end }}

{{- /* ceil(shutdown.grace_ms / 1000), the drain time in seconds. */}}
{{- define "inspection-gateway.graceSeconds" -}}
{{- $shutdown := default dict .Values.config.shutdown }}
{{- $graceMs := 10000 }}
{{- if hasKey $shutdown "grace_ms" }}{{ $graceMs = int64 $shutdown.grace_ms }}{{ end }}
{{- div (add $graceMs 999) 1000 }}
{{- end }}

{{- define "inspection-gateway.terminationGracePeriodSeconds" -}}
{{- $drain := add (int64 (include "inspection-gateway.graceSeconds" .)) (int64 .Values.lifecycle.preStopSleepSeconds) }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $drain 5 }}
{{- else }}
{{- int64 .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* Checks: every rule a schema cannot express. Renders nothing; fails with a message. */}}
{{- /* The Secret of the gRPC listener's TLS files ("" when grpcTls is off). */}}
{{- define "inspection-gateway.grpcTlsSecret" -}}
{{- if .Values.grpcTls.enabled }}
{{- default (printf "%s-grpc-tls" (include "inspection-gateway.fullname" .)) .Values.grpcTls.existingSecret }}
{{- end }}
{{- end }}

{{- /* The ConfigMap holding the authorization policy ("" when there is none). */}}
{{- define "inspection-gateway.authzConfigMap" -}}
{{- if .Values.authzPolicy.existingConfigMap }}
{{- .Values.authzPolicy.existingConfigMap }}
{{- else if .Values.authzPolicy.policy }}
{{- printf "%s-authz" (include "inspection-gateway.fullname" .) }}
{{- end }}
{{- end }}

{{- define "inspection-gateway.validate" -}}
{{- $v := .Values }}
{{- $cfg := default dict $v.config }}
{{- /* Upstream first: with the defaults (no sandbox, no vendor) this is the message. */}}
{{- if $v.sandbox.enabled }}
{{- range $key := list "upstream_url" "webapp_url" }}
{{- if get $cfg $key }}
{{- fail (printf "sandbox.enabled points config.%s at the sandbox: leave config.%s empty, or set sandbox.enabled=false" $key $key) }}
{{- end }}
{{- end }}
{{- else if not (and (get $cfg "upstream_url") (get $cfg "webapp_url")) }}
{{- fail "no upstream: set config.upstream_url and config.webapp_url (the vendor's API and customer web app) with the vendor API key (secrets.apiKey or secrets.existingSecret), or install the development setup, the gateway in front of the sandbox (vendor emulator): -f values-sandbox.yaml (sandbox.enabled=true)" }}
{{- end }}
{{- $grpcCfg := default dict (get $cfg "grpc") }}
{{- range $key, $instead := dict "tls" "grpcTls.*" "authz_policy_file" "authzPolicy.*" "authz_refresh_interval_seconds" "authzPolicy.refreshIntervalSeconds" }}
{{- if hasKey $grpcCfg $key }}
{{- fail (printf "config.grpc.%s is set by the chart: use %s instead" $key $instead) }}
{{- end }}
{{- end }}
{{- if and $v.grpcTls.enabled (not $v.grpcTls.existingSecret) (not $v.grpcTls.certManager.enabled) }}
{{- fail "grpcTls.enabled needs grpcTls.existingSecret (a kubernetes.io/tls Secret) or grpcTls.certManager.enabled" }}
{{- end }}
{{- if and $v.grpcTls.certManager.enabled (not $v.grpcTls.certManager.issuerRef.name) }}
{{- fail "grpcTls.certManager.enabled needs grpcTls.certManager.issuerRef.name" }}
{{- end }}
{{- if and $v.grpcTls.enabled (eq $v.probes.type "grpc") }}
{{- fail "probes.type=grpc cannot probe a TLS listener (the kubelet's gRPC probe is plaintext): use probes.type=http with grpcTls.enabled" }}
{{- end }}
{{- if and $v.ingress.enabled (not $v.ingress.tls.enabled) (not $v.ingress.allowPlaintext) }}
{{- fail "ingress.enabled without ingress.tls.enabled: the vendor's webhooks carry the webhook key and customer data; enable TLS, or set ingress.allowPlaintext when a load balancer in front terminates it" }}
{{- end }}
{{- $managed := dict "grpc_addr" "containerPorts.grpc" "webhook_addr" "containerPorts.webhook" "admin_addr" "containerPorts.admin" "accounts" "vendorAccounts (each account's keys come from its Secret)" "api_key_file" "secrets.apiKey or secrets.existingSecret" "webhook_key_file" "secrets.webhookKey or secrets.existingSecret.webhookKeyKey" "webhook_previous_key_file" "secrets.webhookPreviousKey or secrets.existingSecret.webhookPreviousKeyKey" "event_log" "eventLog.*" "sandbox" "sandbox.enabled (the chart runs the sandbox as its own Deployment)" }}
{{- range $key, $instead := $managed }}
{{- if hasKey $cfg $key }}
{{- fail (printf "config.%s is set by the chart: use %s instead" $key $instead) }}
{{- end }}
{{- end }}
{{- range $key := list "api_key" "webhook_key" "webhook_previous_key" }}
{{- if hasKey $cfg $key }}
{{- fail (printf "config.%s: secrets never go in the config file (it is a ConfigMap); use the secrets.* values" $key) }}
{{- end }}
{{- end }}
{{- /* An account's webhooks are received only when the default account has a webhook key. */}}
{{- range $name, $account := $v.vendorAccounts }}
{{- if and $account.webhookKeyKey (not (include "inspection-gateway.hasWebhookKey" $)) }}
{{- fail (printf "vendorAccounts.%s.webhookKeyKey needs the default account's webhook key too (secrets.webhookKey or secrets.existingSecret.webhookKeyKey): it starts the webhook receiver" $name) }}
{{- end }}
{{- end }}
{{- /* More than one replica needs a shared event log. */}}
{{- $replicas := int $v.replicaCount }}
{{- $what := printf "replicaCount=%d" $replicas }}
{{- if $v.autoscaling.enabled }}
{{- $replicas = int $v.autoscaling.maxReplicas }}
{{- $what = printf "autoscaling.maxReplicas=%d" $replicas }}
{{- end }}
{{- if and (gt $replicas 1) (ne $v.eventLog.backend "redis") }}
{{- fail (printf "%s needs a shared event log: with eventLog.backend=%s every replica keeps its own log and a webhook received by one replica never reaches the streams of another. Set eventLog.backend=redis (and eventLog.redis.host), or run one replica." $what $v.eventLog.backend) }}
{{- end }}
{{- if and $v.autoscaling.enabled (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" }}
{{- end }}
{{- if and $v.autoscaling.enabled (kindIs "invalid" $v.autoscaling.targetCPUUtilizationPercentage) (kindIs "invalid" $v.autoscaling.targetMemoryUtilizationPercentage) }}
{{- fail "autoscaling.enabled needs targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" }}
{{- end }}
{{- /* Redis. */}}
{{- $r := $v.eventLog.redis }}
{{- $sentinel := $r.sentinel }}
{{- if eq $v.eventLog.backend "redis" }}
{{- if $sentinel.enabled }}
{{- if $r.host }}
{{- fail "eventLog.redis.host is the server of a redis:// URL; with eventLog.redis.sentinel.enabled the sentinels name the primary: leave host empty and list the sentinels in eventLog.redis.sentinel.hosts" }}
{{- end }}
{{- if not $r.existingSecret.urlKey }}
{{- if not $sentinel.hosts }}
{{- fail "eventLog.redis.sentinel.enabled needs eventLog.redis.sentinel.hosts: the sentinels as host[:port] (port default 26379), e.g. redis-node-0.redis-headless.redis.svc.cluster.local for Bitnami's chart" }}
{{- end }}
{{- if not $sentinel.masterName }}
{{- fail "eventLog.redis.sentinel.enabled needs eventLog.redis.sentinel.masterName: the name the sentinels monitor the primary under (Bitnami: sentinel.masterSet, default mymaster)" }}
{{- end }}
{{- end }}
{{- range $sentinel.hosts }}
{{- $port := regexFind "[0-9]+$" (regexFind ":[0-9]+$" .) }}
{{- if and $port (or (lt (atoi $port) 1) (gt (atoi $port) 65535)) }}
{{- fail (printf "eventLog.redis.sentinel.hosts: %s: the port must be 1..65535" .) }}
{{- end }}
{{- end }}
{{- else if and (not $r.host) (not (and $r.existingSecret.name $r.existingSecret.urlKey)) }}
{{- fail "eventLog.backend=redis needs eventLog.redis.host, or eventLog.redis.sentinel.enabled with sentinel.hosts (or eventLog.redis.existingSecret.name + urlKey)" }}
{{- end }}
{{- if and (or $r.existingSecret.passwordKey $r.existingSecret.urlKey) (not $r.existingSecret.name) }}
{{- fail "eventLog.redis.existingSecret.passwordKey/urlKey need eventLog.redis.existingSecret.name" }}
{{- end }}
{{- if and $r.existingSecret.passwordKey $r.existingSecret.urlKey }}
{{- fail "eventLog.redis.existingSecret: set passwordKey or urlKey, not both" }}
{{- end }}
{{- if and $r.password $r.existingSecret.name }}
{{- fail "eventLog.redis: set password or existingSecret, not both" }}
{{- end }}
{{- if and $r.existingSecret.name (not (or $r.existingSecret.passwordKey $r.existingSecret.urlKey)) }}
{{- fail "eventLog.redis.existingSecret.name needs passwordKey or urlKey" }}
{{- end }}
{{- if and $r.username (not (or $r.password $r.existingSecret.passwordKey)) }}
{{- fail "eventLog.redis.username needs a password (eventLog.redis.password or existingSecret.passwordKey)" }}
{{- end }}
{{- end }}
{{- if and $sentinel.enabled (ne $v.eventLog.backend "redis") }}
{{- fail (printf "eventLog.redis.sentinel.enabled needs eventLog.backend=redis (it is %s: the SQLite event log is a file in the pod, there is no Redis primary to find)" $v.eventLog.backend) }}
{{- end }}
{{- if and (or $sentinel.password $sentinel.existingSecret.name $sentinel.existingSecret.passwordKey) (not $sentinel.enabled) }}
{{- fail "eventLog.redis.sentinel.password/existingSecret are the sentinels' password: they need eventLog.redis.sentinel.enabled (a redis:// server's password is eventLog.redis.password/existingSecret)" }}
{{- end }}
{{- if and $sentinel.password $sentinel.existingSecret.name }}
{{- fail "eventLog.redis.sentinel: set password or existingSecret, not both" }}
{{- end }}
{{- if and $sentinel.existingSecret.name (not $sentinel.existingSecret.passwordKey) }}
{{- fail "eventLog.redis.sentinel.existingSecret.name needs passwordKey (the key holding the sentinels' password; Bitnami: redis-password)" }}
{{- end }}
{{- if and $sentinel.existingSecret.passwordKey (not $sentinel.existingSecret.name) }}
{{- fail "eventLog.redis.sentinel.existingSecret.passwordKey needs eventLog.redis.sentinel.existingSecret.name" }}
{{- end }}
{{- $redisCfg := default dict (get $cfg "redis") }}
{{- if hasKey $redisCfg "sentinel_password_file" }}
{{- fail "config.redis.sentinel_password_file is set by the chart: use eventLog.redis.sentinel.password or eventLog.redis.sentinel.existingSecret" }}
{{- end }}
{{- if hasKey $redisCfg "sentinel_password" }}
{{- fail "config.redis.sentinel_password: secrets never go in the config file (it is a ConfigMap); use eventLog.redis.sentinel.password or eventLog.redis.sentinel.existingSecret" }}
{{- end }}
{{- if and (eq $v.eventLog.backend "redis") $v.eventLog.sqlite.persistence.enabled }}
{{- fail "eventLog.sqlite.persistence.enabled is for eventLog.backend=sqlite" }}
{{- end }}
{{- /* Secrets. */}}
{{- $s := $v.secrets }}
{{- if $s.existingSecret.name }}
{{- if or $s.apiKey $s.webhookKey $s.webhookPreviousKey }}
{{- fail "secrets.existingSecret.name is set: leave secrets.apiKey, webhookKey and webhookPreviousKey empty (put them in your Secret)" }}
{{- end }}
{{- if not $s.existingSecret.apiKeyKey }}
{{- fail "secrets.existingSecret.apiKeyKey must name the key of the vendor API key" }}
{{- end }}
{{- else if and (not $s.apiKey) (not $v.sandbox.enabled) }}
{{- fail "the vendor API key is required: set secrets.apiKey, or secrets.existingSecret.name (a Secret with key api-key), or enable the sandbox" }}
{{- end }}
{{- if and $s.webhookPreviousKey (not (include "inspection-gateway.webhookKeyValue" .)) }}
{{- fail "secrets.webhookPreviousKey needs secrets.webhookKey (the current key)" }}
{{- end }}
{{- /* Ingress: the webhook receiver only runs with a webhook key. */}}
{{- if $v.ingress.enabled }}
{{- if not $v.ingress.host }}
{{- fail "ingress.enabled needs ingress.host (the public host name the vendor posts to)" }}
{{- end }}
{{- if not (include "inspection-gateway.hasWebhookKey" .) }}
{{- fail "ingress.enabled needs a webhook key (secrets.webhookKey or secrets.existingSecret.webhookKeyKey): without one the gateway does not start its webhook receiver" }}
{{- end }}
{{- if and $v.ingress.tls.enabled (not $v.ingress.tls.secretName) }}
{{- fail "ingress.tls.enabled needs ingress.tls.secretName" }}
{{- end }}
{{- end }}
{{- /* Graceful termination must outlast the drain. */}}
{{- $drain := add (int64 (include "inspection-gateway.graceSeconds" .)) (int64 $v.lifecycle.preStopSleepSeconds) }}
{{- if le (int64 (include "inspection-gateway.terminationGracePeriodSeconds" .)) $drain }}
{{- fail (printf "terminationGracePeriodSeconds=%v must be larger than ceil(config.shutdown.grace_ms/1000) + lifecycle.preStopSleepSeconds = %d, or calls are killed before they drain" $v.terminationGracePeriodSeconds $drain) }}
{{- end }}
{{- /* PodDisruptionBudget. */}}
{{- if $v.podDisruptionBudget.enabled }}
{{- $pdb := $v.podDisruptionBudget }}
{{- if and (not (kindIs "invalid" $pdb.maxUnavailable)) (not (kindIs "invalid" $pdb.minAvailable)) }}
{{- fail "podDisruptionBudget: set maxUnavailable or minAvailable, not both (set the other to null)" }}
{{- end }}
{{- if and (kindIs "invalid" $pdb.maxUnavailable) (kindIs "invalid" $pdb.minAvailable) }}
{{- fail "podDisruptionBudget.enabled needs maxUnavailable or minAvailable" }}
{{- end }}
{{- end }}
{{- if and $v.networkPolicy.enabled $v.ingress.enabled (not $v.networkPolicy.webhook.ingressControllerNamespace) }}
{{- fail "networkPolicy.enabled with ingress.enabled needs networkPolicy.webhook.ingressControllerNamespace" }}
{{- end }}
{{- end }}
