#include "rpc/limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"

namespace granary::rpc {
namespace {

int Millis(absl::Duration d) {
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, INT32_MAX));
}

}  // namespace

absl::Status ValidateServerLimits(const ServerLimits& limits) {
  if (limits.memory_bytes < (int64_t{16} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc_memory_bytes must be at least 16 MiB (16777216), not ",
        limits.memory_bytes));
  }
  if (limits.max_streams_per_connection < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_streams_per_connection must be positive, not ",
                     limits.max_streams_per_connection));
  }
  if (limits.keepalive_time < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keepalive_time must be at least 1s, not ",
                     absl::FormatDuration(limits.keepalive_time)));
  }
  if (limits.keepalive_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keepalive_timeout must be at least 100ms, not ",
                     absl::FormatDuration(limits.keepalive_timeout)));
  }
  if (limits.handshake_timeout < absl::Milliseconds(100) ||
      limits.handshake_timeout > absl::Minutes(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--handshake_timeout must be from 100ms to 10m, not ",
                     absl::FormatDuration(limits.handshake_timeout)));
  }
  if (limits.max_connection_age < absl::Seconds(1) ||
      limits.max_connection_age > absl::Hours(24 * 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_connection_age must be from 1s to 576h, not ",
                     absl::FormatDuration(limits.max_connection_age)));
  }
  if (limits.max_connection_age_grace < absl::Seconds(1) ||
      limits.max_connection_age_grace > absl::Hours(24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_connection_age_grace must be from 1s to 24h, not ",
                     absl::FormatDuration(limits.max_connection_age_grace)));
  }
  return absl::OkStatus();
}

void ApplyServerLimits(const ServerLimits& limits,
                       grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(limits.max_message_bytes);
  builder->SetMaxSendMessageSize(limits.max_message_bytes);
  grpc::ResourceQuota quota("granary-server");
  quota.Resize(static_cast<size_t>(limits.memory_bytes));
  builder->SetResourceQuota(quota);  // holds its own reference
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              limits.max_streams_per_connection);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              Millis(limits.keepalive_time));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              Millis(limits.keepalive_timeout));
  // Idle clients are pinged too: a client that vanished without a FIN
  // (a crashed host, a dropped NAT entry) is closed.
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      Millis(limits.min_client_ping_interval));
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                              Millis(limits.handshake_timeout));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                              Millis(limits.max_connection_age));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                              Millis(limits.max_connection_age_grace));
}

void ApplyChannelLimits(const ChannelLimits& limits,
                        grpc::ChannelArguments* args) {
  args->SetMaxReceiveMessageSize(limits.max_receive_bytes);
  args->SetMaxSendMessageSize(limits.max_send_bytes);
  args->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(limits.keepalive_time));
  args->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(limits.keepalive_timeout));
  args->SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args->SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

std::shared_ptr<grpc::Channel> NewChannel(
    const std::string& address,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const ChannelLimits& limits) {
  grpc::ChannelArguments args;
  ApplyChannelLimits(limits, &args);
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace granary::rpc
