{{- define "gotemplate.redefined" -}}from-override{{- end -}}
