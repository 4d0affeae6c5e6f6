// The gated delta rule token by token on the CPU, forward and backward (epiformer.model.delta_rule_kernel).
//
// Per sequence (one batch row and head), state S [D, E] (keys by values), per token t:
//     S' = a_t S,  a_t = exp(log_decay_t)
//     e_t = v_t - S'^T k_t
//     S  = S' + beta_t k_t e_t^T
//     o_t = S^T q_t
// Each token reads and writes the state a few times (about 4 D E multiply-adds forward, 11 backward),
// all of it in the core's cache: where the chunked PyTorch form pays for many small matrix products and
// their autograd graph, this runs at the pace of its arithmetic. The forward pass keeps the state at the
// start of every `chunk` tokens; the backward pass recomputes each chunk's states from there and walks
// its tokens in reverse, carrying G = dL/dS. Sequences run in parallel (at::parallel_for). `reverse` runs a
// sequence from its last token to its first (the bidirectional rule's second scan) without a flipped copy.
// Outputs and gradients are added to the tensors given, so that both directions sum into one.
//
// Reductions over the state's rows and columns are written as `omp simd reduction` loops: with
// -fopenmp-simd the compiler vectorises them, reordering only these sums.

#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace {

// FIXED_E: the value size known when compiled (its loops unrolled, the error vector held in registers), or 0.
template <typename scalar_t, int64_t FIXED_E>
void forward_sequence(const scalar_t* q, const scalar_t* k, const scalar_t* v, const scalar_t* beta,
                      const scalar_t* log_decay, scalar_t* out, scalar_t* checkpoints, int64_t T, int64_t D,
                      int64_t values, int64_t chunk, bool reverse) {
  const int64_t E = FIXED_E > 0 ? FIXED_E : values;
  std::vector<scalar_t> state(D * E, scalar_t(0)), error(FIXED_E > 0 ? 0 : E);
  alignas(64) scalar_t fixed_error[FIXED_E > 0 ? FIXED_E : 1];
  scalar_t* S = state.data();
  scalar_t* e = FIXED_E > 0 ? fixed_error : error.data();
  for (int64_t step = 0; step < T; ++step) {
    if (checkpoints != nullptr && step % chunk == 0) std::copy(S, S + D * E, checkpoints + (step / chunk) * D * E);
    const int64_t t = reverse ? T - 1 - step : step;
    const scalar_t* kt = k + t * D;
    const scalar_t* qt = q + t * D;
    const scalar_t* vt = v + t * E;
    const scalar_t a = std::exp(log_decay[t]);
    const scalar_t b = beta[t];
    std::fill(e, e + E, scalar_t(0));
    for (int64_t i = 0; i < D; ++i) {  // e = S^T k
      const scalar_t ki = kt[i];
      const scalar_t* Si = S + i * E;
#pragma omp simd
      for (int64_t j = 0; j < E; ++j) e[j] += Si[j] * ki;
    }
#pragma omp simd
    for (int64_t j = 0; j < E; ++j) e[j] = vt[j] - a * e[j];  // e = v - S'^T k
    scalar_t* ot = out + t * E;
    for (int64_t i = 0; i < D; ++i) {  // S = a S + b k e^T; o = S^T q
      const scalar_t bk = b * kt[i];
      const scalar_t qi = qt[i];
      scalar_t* Si = S + i * E;
#pragma omp simd
      for (int64_t j = 0; j < E; ++j) {
        Si[j] = a * Si[j] + bk * e[j];
        ot[j] += Si[j] * qi;
      }
    }
  }
}

template <typename scalar_t, int64_t FIXED_E>
void backward_sequence(const scalar_t* q, const scalar_t* k, const scalar_t* v, const scalar_t* beta,
                       const scalar_t* log_decay, const scalar_t* checkpoints, const scalar_t* grad_out,
                       scalar_t* dq, scalar_t* dk, scalar_t* dv, scalar_t* dbeta, scalar_t* dlog_decay, int64_t T,
                       int64_t D, int64_t values, int64_t chunk, bool reverse) {
  const int64_t E = FIXED_E > 0 ? FIXED_E : values;
  const int64_t size = D * E;
  if (T == 0) return;  // no tokens: nothing kept, nothing to undo
  // G: dL/dS after the token being undone; `before`: each token's state before it, in this chunk;
  // `errors`: each token's e.
  std::vector<scalar_t> gradient(size, scalar_t(0)), before(chunk * size), errors(chunk * E), ge(D);
  std::vector<scalar_t> error_gradient(FIXED_E > 0 ? 0 : E), held_by_column(FIXED_E > 0 ? 0 : E);
  alignas(64) scalar_t fixed_error_gradient[FIXED_E > 0 ? FIXED_E : 1], fixed_held[FIXED_E > 0 ? FIXED_E : 1];
  scalar_t* de = FIXED_E > 0 ? fixed_error_gradient : error_gradient.data();
  scalar_t* held = FIXED_E > 0 ? fixed_held : held_by_column.data();
  scalar_t* G = gradient.data();
  for (int64_t c = (T - 1) / chunk; c >= 0; --c) {
    const int64_t start = c * chunk, stop = std::min(T, start + chunk);
    std::copy(checkpoints + c * size, checkpoints + (c + 1) * size, before.data());
    for (int64_t step = start; step < stop; ++step) {  // the chunk's states again, as the forward pass had them
      const int64_t n = step - start, t = reverse ? T - 1 - step : step;
      const scalar_t* Sb = before.data() + n * size;
      scalar_t* e = errors.data() + n * E;
      const scalar_t* kt = k + t * D;
      const scalar_t a = std::exp(log_decay[t]);
      const scalar_t b = beta[t];
      std::fill(e, e + E, scalar_t(0));
      for (int64_t i = 0; i < D; ++i) {
        const scalar_t ki = kt[i];
        const scalar_t* Si = Sb + i * E;
#pragma omp simd
        for (int64_t j = 0; j < E; ++j) e[j] += Si[j] * ki;
      }
#pragma omp simd
      for (int64_t j = 0; j < E; ++j) e[j] = v[t * E + j] - a * e[j];
      if (step + 1 < stop) {
        scalar_t* Sn = before.data() + (n + 1) * size;
        for (int64_t i = 0; i < D; ++i) {
          const scalar_t bk = b * kt[i];
#pragma omp simd
          for (int64_t j = 0; j < E; ++j) Sn[i * E + j] = a * Sb[i * E + j] + bk * e[j];
        }
      }
    }
    for (int64_t step = stop - 1; step >= start; --step) {
      const int64_t n = step - start, t = reverse ? T - 1 - step : step;
      const scalar_t* Sb = before.data() + n * size;
      const scalar_t* e = errors.data() + n * E;
      const scalar_t* kt = k + t * D;
      const scalar_t* qt = q + t * D;
      const scalar_t* go = grad_out + t * E;
      const scalar_t a = std::exp(log_decay[t]);
      const scalar_t b = beta[t];
      // G += q dO^T (o = S^T q); dq = S dO = a S_before dO + b k (e . dO); G e; G^T k.
      scalar_t error_read = 0;
#pragma omp simd reduction(+ : error_read)
      for (int64_t j = 0; j < E; ++j) error_read += e[j] * go[j];
      std::fill(de, de + E, scalar_t(0));
      for (int64_t i = 0; i < D; ++i) {
        scalar_t* Gi = G + i * E;
        const scalar_t* Si = Sb + i * E;
        const scalar_t ki = kt[i], qi = qt[i];
        scalar_t to_q = 0, to_e = 0;
#pragma omp simd reduction(+ : to_q, to_e)
        for (int64_t j = 0; j < E; ++j) {
          Gi[j] += qi * go[j];
          to_q += Si[j] * go[j];
          to_e += Gi[j] * e[j];
          de[j] += Gi[j] * ki;
        }
        dq[t * D + i] += a * to_q + b * ki * error_read;
        ge[i] = to_e;
      }
      // S = S' + b k e^T: dbeta = k^T G e, dk = b G e, de = b G^T k; e = v - S'^T k: dv = de.
      scalar_t to_beta = 0;
      for (int64_t i = 0; i < D; ++i) to_beta += kt[i] * ge[i];
      dbeta[t] += to_beta;
#pragma omp simd
      for (int64_t j = 0; j < E; ++j) {
        de[j] *= b;
        dv[t * E + j] += de[j];
      }
      // dS' = G - k de^T; dk -= S' de; da = <dS', S before> (summed a column at a time, across the rows, so
      // that only one sum runs across a vector's lanes); dL/dS before = a dS'.
      std::fill(held, held + E, scalar_t(0));
      for (int64_t i = 0; i < D; ++i) {
        scalar_t* Gi = G + i * E;
        const scalar_t* Si = Sb + i * E;
        const scalar_t ki = kt[i];
        scalar_t read = 0;
#pragma omp simd reduction(+ : read)
        for (int64_t j = 0; j < E; ++j) {
          Gi[j] -= ki * de[j];
          read += Si[j] * de[j];
          held[j] += Gi[j] * Si[j];
          Gi[j] *= a;
        }
        dk[t * D + i] += b * ge[i] - a * read;
      }
      scalar_t to_a = 0;
#pragma omp simd reduction(+ : to_a)
      for (int64_t j = 0; j < E; ++j) to_a += held[j];
      dlog_decay[t] += to_a * a;
    }
  }
}

void check_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& beta,
                  const torch::Tensor& log_decay) {
  TORCH_CHECK(q.device().is_cpu(), "delta_rule_kernel runs on the CPU");
  TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3, "q, k [N, T, D] and v [N, T, E] expected");
  TORCH_CHECK(v.size(0) == q.size(0) && v.size(1) == q.size(1), "v's sequences and tokens must match q's");
  TORCH_CHECK(beta.sizes() == q.sizes().slice(0, 2) && log_decay.sizes() == beta.sizes(), "beta, log_decay [N, T]");
  for (const auto* x : {&q, &k, &v, &beta, &log_decay}) {
    TORCH_CHECK(x->device().is_cpu() && x->is_contiguous() && x->scalar_type() == q.scalar_type(),
                "contiguous CPU inputs of one dtype expected");
  }
}

// body(std::integral_constant<int64_t, E>) for the value sizes the kernels are unrolled for, else with 0.
template <typename Body>
void with_value_size(int64_t values, Body body) {
  switch (values) {
    case 8: return body(std::integral_constant<int64_t, 8>{});
    case 16: return body(std::integral_constant<int64_t, 16>{});
    case 32: return body(std::integral_constant<int64_t, 32>{});
    case 64: return body(std::integral_constant<int64_t, 64>{});
    default: return body(std::integral_constant<int64_t, 0>{});
  }
}

}  // namespace

// Adds the outputs of the scan (`reverse`: from the last token) to `out` [N, T, E]; returns the state every
// `chunk` steps of the scan when `keep_states`, else an empty tensor.
torch::Tensor forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor beta, torch::Tensor log_decay,
                      torch::Tensor out, int64_t chunk, bool keep_states, bool reverse) {
  check_inputs(q, k, v, beta, log_decay);
  TORCH_CHECK(out.sizes() == v.sizes() && out.is_contiguous() && out.scalar_type() == v.scalar_type(), "out like v");
  TORCH_CHECK(chunk > 0, "chunk must be positive");
  const int64_t N = q.size(0), T = q.size(1), D = q.size(2), E = v.size(2);
  const int64_t kept = keep_states ? (T + chunk - 1) / chunk : 0;
  auto checkpoints = torch::empty({N, kept, D, E}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_rule_forward", [&] {
    const auto *pq = q.data_ptr<scalar_t>(), *pk = k.data_ptr<scalar_t>(), *pv = v.data_ptr<scalar_t>();
    const auto *pb = beta.data_ptr<scalar_t>(), *pl = log_decay.data_ptr<scalar_t>();
    auto *po = out.data_ptr<scalar_t>(), *pc = checkpoints.data_ptr<scalar_t>();
    with_value_size(E, [&](auto fixed) {
    at::parallel_for(0, N, 1, [&](int64_t first, int64_t last) {
      for (int64_t n = first; n < last; ++n) {
        forward_sequence<scalar_t, decltype(fixed)::value>(pq + n * T * D, pk + n * T * D, pv + n * T * E, pb + n * T, pl + n * T,
                                   po + n * T * E, keep_states ? pc + n * kept * D * E : nullptr, T, D, E, chunk,
                                   reverse);
      }
    });
    });
  });
  return checkpoints;
}

// Adds the scan's gradients (given its outputs' gradient and the states `forward` kept) to dq, dk, dv, dbeta and
// dlog_decay, each shaped and typed as its input.
void backward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor beta, torch::Tensor log_decay,
              torch::Tensor checkpoints, torch::Tensor grad_out, torch::Tensor dq, torch::Tensor dk, torch::Tensor dv,
              torch::Tensor dbeta, torch::Tensor dlog_decay, int64_t chunk, bool reverse) {
  check_inputs(q, k, v, beta, log_decay);
  check_inputs(dq, dk, dv, dbeta, dlog_decay);
  TORCH_CHECK(dq.sizes() == q.sizes() && dv.sizes() == v.sizes() && dbeta.sizes() == beta.sizes(), "gradients' shapes");
  TORCH_CHECK(dq.scalar_type() == q.scalar_type(), "gradients of the inputs' dtype");
  TORCH_CHECK(chunk > 0, "chunk must be positive");
  const int64_t N = q.size(0), T = q.size(1), D = q.size(2), E = v.size(2);
  TORCH_CHECK(checkpoints.is_contiguous() && checkpoints.scalar_type() == q.scalar_type() &&
                  checkpoints.sizes() == at::IntArrayRef({N, (T + chunk - 1) / chunk, D, E}),
              "checkpoints of another shape (or chunk size) than these inputs'");
  TORCH_CHECK(grad_out.sizes() == v.sizes() && grad_out.scalar_type() == v.scalar_type(), "grad_out like v");
  grad_out = grad_out.contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "delta_rule_backward", [&] {
    const auto *pq = q.data_ptr<scalar_t>(), *pk = k.data_ptr<scalar_t>(), *pv = v.data_ptr<scalar_t>();
    const auto *pb = beta.data_ptr<scalar_t>(), *pl = log_decay.data_ptr<scalar_t>();
    const auto *pc = checkpoints.data_ptr<scalar_t>(), *pg = grad_out.data_ptr<scalar_t>();
    auto *gq = dq.data_ptr<scalar_t>(), *gk = dk.data_ptr<scalar_t>(), *gv = dv.data_ptr<scalar_t>();
    auto *gb = dbeta.data_ptr<scalar_t>(), *gl = dlog_decay.data_ptr<scalar_t>();
    const int64_t kept = checkpoints.size(1);
    with_value_size(E, [&](auto fixed) {
    at::parallel_for(0, N, 1, [&](int64_t first, int64_t last) {
      for (int64_t n = first; n < last; ++n) {
        backward_sequence<scalar_t, decltype(fixed)::value>(pq + n * T * D, pk + n * T * D, pv + n * T * E, pb + n * T, pl + n * T,
                                    pc + n * kept * D * E, pg + n * T * E, gq + n * T * D, gk + n * T * D,
                                    gv + n * T * E, gb + n * T, gl + n * T, T, D, E, chunk, reverse);
      }
    });
    });
  });
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "the gated delta rule token by token, added to out; the states kept");
  m.def("backward", &backward, "its gradients, added to dq, dk, dv, dbeta, dlog_decay");
}
