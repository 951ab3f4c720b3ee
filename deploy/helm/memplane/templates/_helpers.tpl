{{- define "memplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "memplane.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "memplane.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "memplane.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "memplane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "memplane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component: pass (dict "root" $ "component" "server"). */}}
{{- define "memplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memplane.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "memplane.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "memplane.secretName" -}}
{{ .Values.existingSecret | default (include "memplane.fullname" .) }}
{{- end }}

{{- define "memplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "memplane.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name | default "default" }}
{{- end }}
{{- end }}

{{/* Resources the migration hook Job needs exist before it: made hooks of the same events, first. */}}
{{- define "memplane.preHook" -}}
{{- if .Values.migrations.enabled }}
helm.sh/hook: pre-install,pre-upgrade
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation
{{- end }}
{{- end }}

{{/* Settings and credentials as environment variables, for every memplane container. */}}
{{- define "memplane.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "memplane.fullname" . }}
  - secretRef:
      name: {{ include "memplane.secretName" . }}
{{- end }}

{{/* The writable places of a read-only root filesystem: /tmp (tokenizer caches) and the data dir. */}}
{{- define "memplane.volumeMounts" -}}
volumeMounts:
  - name: tmp
    mountPath: /tmp
  - name: data
    mountPath: /var/lib/memplane
{{- if .Values.userKeys.existingClaim }}
  - name: user-keys
    mountPath: /var/lib/memplane-user-keys
{{- end }}
{{- end }}

{{- define "memplane.volumes" -}}
volumes:
  - name: tmp
    emptyDir: {}
  - name: data
    emptyDir: {}
{{- with .Values.userKeys.existingClaim }}
  - name: user-keys
    persistentVolumeClaim:
      claimName: {{ . }}
{{- end }}
{{- end }}

{{/* topologySpreadConstraints of one component: pass (dict "root" $ "component" "server"). */}}
{{- define "memplane.topologySpread" -}}
{{- with .root.Values.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
  - {{ toYaml . | nindent 4 | trim }}
    labelSelector:
      matchLabels:
        {{- include "memplane.selectorLabels" (dict "root" $.root "component" $.component) | nindent 8 }}
{{- end }}
{{- end }}
{{- end }}
