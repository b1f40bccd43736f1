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

{{/* Environment both Deployments share: the Redis URL (from a Secret), the replicas a 202 waits for, and
the data directory. */}}
{{- define "relay.env" -}}
{{- if .Values.redis.existingSecret }}
- name: RELAY_REDIS__URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.existingSecretKey }}
{{- else if not (or .Values.redis.url .Values.existingSecret) }}
{{- fail "set redis.url (or redis.existingSecret): relay needs an external Redis with persistence" }}
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

{{/* Volumes both Deployments share: the config, writable /tmp and /data, and the extra ones. */}}
{{- define "relay.volumes" -}}
- name: config
  configMap:
    name: {{ include "relay.fullname" . }}
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
