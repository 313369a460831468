{{- define "gotemplate.name" -}}
{{ .Chart.Name }}-{{ .Release.Name }}
{{- end -}}
{{- define "gotemplate.redefined" -}}first{{- end -}}
{{/* a comment */}}
