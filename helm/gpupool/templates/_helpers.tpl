{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "gpupool.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name, used for every object of the chart. */}}
{{- define "gpupool.fullname" -}}
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

{{- define "gpupool.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpupool.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpupool.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpupool.labels" -}}
helm.sh/chart: {{ include "gpupool.chart" . }}
{{ include "gpupool.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpupool.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpupool.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gpupool.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "gpupool.secretName" -}}
{{- default (printf "%s-operator" (include "gpupool.fullname" .)) .Values.operator.existingSecret }}
{{- end }}

{{- define "gpupool.managementServiceName" -}}
{{- printf "%s-management" (include "gpupool.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Spring profiles: production, the backend profile, then the operator's extras. */}}
{{- define "gpupool.profiles" -}}
{{- $profiles := list "production" (ternary "cuda" "host" .Values.gpu.enabled) }}
{{- join "," (concat $profiles .Values.extraProfiles) }}
{{- end }}

{{/* ConfigMap data: files/config/* (synced from the repository's config/) plus config.extraFiles. */}}
{{- define "gpupool.configData" -}}
{{- $files := dict }}
{{- range $path, $_ := .Files.Glob "files/config/*.yml" }}
{{- $_ := set $files (base $path) ($.Files.Get $path) }}
{{- end }}
{{- range $name, $content := .Values.config.extraFiles }}
{{- $_ := set $files $name $content }}
{{- end }}
{{- toYaml $files }}
{{- end }}

{{/* The server container's environment, shared by the Deployment and the KServe runtime:
     dict "root" (the chart context) "modelsPath" (where the model repository is mounted)
     "configLocation" (spring.config.additional-location). */}}
{{- define "gpupool.containerEnv" -}}
{{- $root := .root -}}
- name: SPRING_PROFILES_ACTIVE
  value: {{ include "gpupool.profiles" $root | quote }}
- name: SPRING_CONFIG_ADDITIONAL_LOCATION
  value: {{ .configLocation | quote }}
- name: SERVER_PORT
  value: "8080"
- name: MANAGEMENT_SERVER_PORT
  value: "8081"
- name: GPUPOOL_MODELS_PATH
  value: {{ .modelsPath }}
- name: GPUPOOL_SECURITY_OPERATOR_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ include "gpupool.secretName" $root }}
      key: username
- name: GPUPOOL_SECURITY_OPERATOR_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "gpupool.secretName" $root }}
      key: password
- name: JDK_JAVA_OPTIONS
  value: {{ $root.Values.javaOptions | quote }}
{{- with $root.Values.env }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Name of the KServe (Cluster)ServingRuntime that InferenceServices select. */}}
{{- define "gpupool.runtimeName" -}}
{{- default (include "gpupool.fullname" .) .Values.kserve.servingRuntime.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Container resources with the GPU limit added when gpu.enabled. */}}
{{- define "gpupool.resources" -}}
{{- $resources := deepCopy .Values.resources }}
{{- if .Values.gpu.enabled }}
{{- $limits := default dict $resources.limits }}
{{- $_ := set $limits .Values.gpu.resourceName (.Values.gpu.count | toString) }}
{{- $_ := set $resources "limits" $limits }}
{{- end }}
{{- toYaml $resources }}
{{- end }}

{{/* Labels KServe puts on the pods of the gpupool runtime (the runtime's spec.labels). */}}
{{- define "gpupool.runtimePodLabels" -}}
app.kubernetes.io/name: {{ include "gpupool.name" . }}
app.kubernetes.io/component: kserve-runtime
gpupool.io/runtime: {{ include "gpupool.runtimeName" . }}
{{- end }}
