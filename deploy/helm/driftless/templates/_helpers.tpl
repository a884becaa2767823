{{- define "driftless.name" -}}driftless{{- end -}}

{{- define "driftless.labels" -}}
app.kubernetes.io/name: driftless
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "driftless.selector" -}}
app.kubernetes.io/name: driftless
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "driftless.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if eq $tag "latest" -}}{{- fail "image.tag must be a version, not latest" -}}{{- end -}}
{{ printf "%s:%s" .Values.image.repository $tag }}
{{- end -}}

{{- define "driftless.secretName" -}}
{{- default (printf "%s-credentials" .Release.Name) .Values.existingSecret -}}
{{- end -}}
