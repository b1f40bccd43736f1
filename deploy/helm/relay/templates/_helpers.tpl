{{/* Names and labels shared by every object of the chart. */}}

{{- define "relay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "relay.fullname" -}}
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

{{- define "relay.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "relay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "relay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "relay.labels" -}}
helm.sh/chart: {{ include "relay.chart" . }}
{{ include "relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "relay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "relay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "relay.secretName" -}}
{{- default (include "relay.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{- define "relay.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The API's image: api.imageTag holds it back while the workers go first (docs/deploy.md, "Upgrading"). */}}
{{- define "relay.apiImage" -}}
{{- printf "%s:%s" .Values.image.repository (default (default .Chart.AppVersion .Values.image.tag) .Values.api.imageTag) -}}
{{- end -}}

{{/* The keys of relay's Secret, each mounted as a file: the ones `secrets` sets (and the Redis URL), or
existingSecretKeys. One a line. */}}
{{- define "relay.secretKeys" -}}
{{- if .Values.existingSecret -}}
{{- range .Values.existingSecretKeys }}
{{ . }}
{{- end -}}
{{- else -}}
{{- range $name, $value := .Values.secrets }}
{{- if $value }}
{{ $name }}
{{- end }}
{{- end }}
{{- if and .Values.redis.url (not .Values.redis.existingSecret) }}
RELAY_REDIS__URL
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Environment both Deployments share: where each secret's file is (relay reads <NAME>_FILE for ${NAME} and
RELAY_<KEY>_FILE for a config key: never a secret in the environment), the replicas a 202 waits for, and
the data directory. */}}
{{- define "relay.env" -}}
{{- if not (or .Values.redis.url .Values.redis.existingSecret .Values.existingSecret) }}
{{- fail "set redis.url (or redis.existingSecret): relay needs an external Redis with persistence" }}
{{- end }}
{{- range (include "relay.secretKeys" . | splitList "\n") }}
{{- if . }}
- name: {{ . }}_FILE
  value: /run/secrets/relay/{{ . }}
{{- end }}
{{- end }}
{{- if .Values.redis.existingSecret }}
- name: RELAY_REDIS__URL_FILE
  value: /run/secrets/redis/url
{{- end }}
{{- if .Values.redis.minReplicas }}
- name: RELAY_REDIS__MIN_REPLICAS
  value: {{ .Values.redis.minReplicas | quote }}
- name: RELAY_REDIS__REPLICA_TIMEOUT
  value: {{ .Values.redis.replicaTimeout | quote }}
{{- end }}
- name: RELAY_DATA_DIR
  value: /data
- name: RELAY_CONFIG
  value: /etc/relay/config.yaml
{{- end -}}

{{/* Volumes both Deployments share: the config, the secrets as files, writable /tmp and /data, and the extra ones. */}}
{{- define "relay.volumes" -}}
- name: config
  configMap:
    name: {{ include "relay.fullname" . }}
- name: secrets
  secret:
    secretName: {{ include "relay.secretName" . }}
    defaultMode: 0440
{{- if .Values.redis.existingSecret }}
- name: redis-url
  secret:
    secretName: {{ .Values.redis.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .Values.redis.existingSecretKey }}
        path: url
{{- end }}
- name: tmp
  emptyDir: {}
- name: data
  emptyDir: {}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "relay.volumeMounts" -}}
- name: config
  mountPath: /etc/relay
  readOnly: true
- name: secrets
  mountPath: /run/secrets/relay
  readOnly: true
{{- if .Values.redis.existingSecret }}
- name: redis-url
  mountPath: /run/secrets/redis
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
- name: data
  mountPath: /data
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Restart pods when their config or Secret changes. */}}
{{- define "relay.checksums" -}}
checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}
