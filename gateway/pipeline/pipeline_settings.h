// The settings of the pipeline's decorators: the retry loop and the response cache.

#ifndef GATEWAY_PIPELINE_PIPELINE_SETTINGS_H_
#define GATEWAY_PIPELINE_PIPELINE_SETTINGS_H_

#include "gateway/pipeline/caching_caller.h"
#include "gateway/pipeline/retrying_caller.h"
#include "gateway/settings/setting.h"

namespace inspection::pipeline {

// The retry loop: backoff, attempts, the shortest attempt worth starting.
settings::Schema<RetryOptions> RetrySchema();
// The response cache.
settings::Schema<CachingOptions> CachingSchema();

}  // namespace inspection::pipeline

#endif  // GATEWAY_PIPELINE_PIPELINE_SETTINGS_H_
