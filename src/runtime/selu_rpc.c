/* The Selu gRPC client, built as the shared module capsule-selu-rpc.so
 * (see selu_rpc_module.h): the only code that links libgrpc. Its
 * functions are reached through the table at the bottom. */
#include "runtime/selu_rpc_module.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capability.pb-c.h"
#include "core/buf.h"

#define METHOD_INVOKE "/selu.capability.v1.CapabilityService/Invoke"
#define METHOD_HEALTH "/selu.capability.v1.CapabilityService/HealthCheck"

struct selu_channel {
  grpc_channel *channel;
  grpc_completion_queue *cq;
};

static int rpc_channel_open(int fd, size_t max_response, struct selu_channel **ret,
                            struct cap_error *err)
{
  *ret = NULL;
  grpc_init();
  grpc_arg args[1] = {{.type = GRPC_ARG_INTEGER,
                       .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                       .value.integer = max_response > INT_MAX ? INT_MAX : (int)max_response}};
  grpc_channel_args cargs = {.num_args = 1, .args = args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *channel = grpc_channel_create_from_fd("capsule-selu", fd, creds, &cargs);
  grpc_channel_credentials_release(creds);
  if (!channel) {
    grpc_shutdown_blocking();
    return cap_error_set(err, EIO, "cannot open a gRPC channel on the capability's socket");
  }
  struct selu_channel *ch = cap_xcalloc(1, sizeof *ch);
  ch->channel = channel;
  ch->cq = grpc_completion_queue_create_for_next(NULL);
  *ret = ch;
  return 0;
}

static void rpc_channel_close(struct selu_channel *ch)
{
  if (!ch)
    return;
  grpc_channel_destroy(ch->channel);
  grpc_completion_queue_shutdown(ch->cq);
  while (grpc_completion_queue_next(ch->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(ch->cq);
  free(ch);
  grpc_shutdown_blocking(); /* no gRPC thread left: this process may fork a keeper next */
}

/* A call that ended with a gRPC status other than OK, as an errno and a
 * message that says what it means for the call. */
static int status_error(grpc_status_code status, grpc_slice details, const char *method,
                        int timeout_ms, struct cap_error *err)
{
  char *msg = grpc_slice_to_c_string(details);
  int r;
  switch (status) {
  case GRPC_STATUS_DEADLINE_EXCEEDED:
    r = cap_error_set(err, ETIMEDOUT, "no answer within %d ms (the deadline)", timeout_ms);
    break;
  case GRPC_STATUS_UNAVAILABLE:
    r = cap_error_set(err, ECONNRESET, "the capability's server went away during the call (%s)",
                      msg);
    break;
  case GRPC_STATUS_RESOURCE_EXHAUSTED:
    r = cap_error_set(err, EFBIG, "the answer is larger than the output cap (%s)", msg);
    break;
  case GRPC_STATUS_UNIMPLEMENTED:
    r = cap_error_set(err, ENOSYS, "the server does not implement %s", method);
    break;
  default:
    r = cap_error_set(err, EPROTO, "%s failed with gRPC status %d: %s", method, (int)status, msg);
  }
  gpr_free(msg);
  return r;
}

/* The answer's bytes, appended to out. */
static int read_answer(grpc_byte_buffer *recv, const char *method, struct cap_buf *out,
                       struct cap_error *err)
{
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, recv))
    return cap_error_set(err, EPROTO, "cannot read the answer to %s", method);
  grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
  cap_buf_append(out, (const char *)GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
  grpc_slice_unref(all);
  grpc_byte_buffer_reader_destroy(&reader);
  return 0;
}

/* One unary call: request bytes in, response bytes out (*out owned). */
static int unary(struct selu_channel *ch, const char *method, const uint8_t *req, size_t req_len,
                 int timeout_ms, struct cap_buf *out, struct cap_error *err)
{
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  grpc_slice method_slice = grpc_slice_from_static_string(method);
  grpc_call *call = grpc_channel_create_call(ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS, ch->cq,
                                             method_slice, NULL, deadline, NULL);
  grpc_slice req_slice = grpc_slice_from_copied_buffer((const char *)req, req_len);
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&req_slice, 1);
  grpc_slice_unref(req_slice);
  grpc_byte_buffer *recv = NULL;
  grpc_metadata_array initial, trailing;
  grpc_metadata_array_init(&initial);
  grpc_metadata_array_init(&trailing);
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  int r = 0;
  if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
    r = cap_error_set(err, EIO, "cannot start the gRPC call %s", method);
  } else {
    /* the call's own deadline ends it; the queue waits a little longer */
    gpr_timespec wait = gpr_time_add(deadline, gpr_time_from_millis(2000, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(ch->cq, wait, NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
      grpc_call_cancel(call, NULL);
      grpc_completion_queue_next(ch->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
      r = cap_error_set(err, ETIMEDOUT, "no answer to %s", method);
    }
  }
  if (r == 0 && status != GRPC_STATUS_OK)
    r = status_error(status, details, method, timeout_ms, err);
  if (r == 0 && !recv)
    r = cap_error_set(err, EPROTO, "%s returned no message", method);
  if (r == 0)
    r = read_answer(recv, method, out, err);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&initial);
  grpc_metadata_array_destroy(&trailing);
  grpc_byte_buffer_destroy(send);
  if (recv)
    grpc_byte_buffer_destroy(recv);
  grpc_call_unref(call);
  return r;
}

static int rpc_health(struct selu_channel *ch, int timeout_ms, bool *healthy, struct cap_error *err)
{
  *healthy = false;
  Selu__Capability__V1__HealthCheckRequest req = SELU__CAPABILITY__V1__HEALTH_CHECK_REQUEST__INIT;
  uint8_t buf[16];
  size_t n = selu__capability__v1__health_check_request__pack(&req, buf);
  struct cap_buf out = {0};
  int r = unary(ch, METHOD_HEALTH, buf, n, timeout_ms, &out, err);
  if (r == 0) {
    Selu__Capability__V1__HealthCheckResponse *resp =
        selu__capability__v1__health_check_response__unpack(NULL, out.len,
                                                            (const uint8_t *)out.data);
    if (!resp) {
      r = cap_error_set(err, EPROTO, "the HealthCheck answer is not a HealthCheckResponse");
    } else {
      *healthy = resp->healthy;
      selu__capability__v1__health_check_response__free_unpacked(resp, NULL);
    }
  }
  cap_buf_free(&out);
  return r;
}

static int rpc_invoke(struct selu_channel *ch, const char *tool, const char *parameters,
                      const char *const *keys, const char *const *values, size_t n_context,
                      int timeout_ms, struct selu_response *resp, struct cap_error *err)
{
  *resp = (struct selu_response){0};
  Selu__Capability__V1__InvokeRequest req = SELU__CAPABILITY__V1__INVOKE_REQUEST__INIT;
  req.tool_name = (char *)tool;
  req.parameters = (char *)parameters;
  Selu__Capability__V1__InvokeRequest__ContextEntry *entries =
      cap_xcalloc(n_context + 1, sizeof *entries);
  Selu__Capability__V1__InvokeRequest__ContextEntry **ptrs =
      cap_xcalloc(n_context + 1, sizeof *ptrs);
  for (size_t i = 0; i < n_context; i++) {
    selu__capability__v1__invoke_request__context_entry__init(&entries[i]);
    entries[i].key = (char *)keys[i];
    entries[i].value = (char *)values[i];
    ptrs[i] = &entries[i];
  }
  req.n_context = n_context;
  req.context = ptrs;
  size_t len = selu__capability__v1__invoke_request__get_packed_size(&req);
  uint8_t *buf = cap_xmalloc(len + 1);
  selu__capability__v1__invoke_request__pack(&req, buf);
  free(ptrs);
  free(entries);
  struct cap_buf out = {0};
  int r = unary(ch, METHOD_INVOKE, buf, len, timeout_ms, &out, err);
  free(buf);
  if (r == 0) {
    Selu__Capability__V1__InvokeResponse *m =
        selu__capability__v1__invoke_response__unpack(NULL, out.len, (const uint8_t *)out.data);
    if (!m) {
      r = cap_error_set(err, EPROTO, "the Invoke answer is not an InvokeResponse");
    } else {
      resp->success = m->success;
      resp->result = cap_xstrdup(m->result ? m->result : "");
      resp->error = cap_xstrdup(m->error ? m->error : "");
      selu__capability__v1__invoke_response__free_unpacked(m, NULL);
    }
  }
  cap_buf_free(&out);
  return r;
}

__attribute__((visibility("default"))) const struct selu_rpc_module selu_rpc_module_v1 = {
    .size = sizeof(struct selu_rpc_module),
    .channel_open = rpc_channel_open,
    .channel_close = rpc_channel_close,
    .health = rpc_health,
    .invoke = rpc_invoke,
};
