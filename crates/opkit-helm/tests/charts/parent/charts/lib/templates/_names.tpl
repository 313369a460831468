{{- define "lib.fullname" -}}
{{ .Release.Name }}-{{ .Chart.Name }}-lib
{{- end -}}
