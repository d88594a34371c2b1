// The settings of the OTLP span exporter (OtlpExporterOptions), declared beside it.

#ifndef GATEWAY_TRACING_OTLP_EXPORTER_SETTINGS_H_
#define GATEWAY_TRACING_OTLP_EXPORTER_SETTINGS_H_

#include "gateway/settings/setting.h"
#include "gateway/tracing/otlp_exporter.h"

namespace inspection::tracing {

// Where spans go and how they are batched.
settings::Schema<OtlpExporterOptions> OtlpExporterSchema();

}  // namespace inspection::tracing

#endif  // GATEWAY_TRACING_OTLP_EXPORTER_SETTINGS_H_
