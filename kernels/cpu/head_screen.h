// Which rows of W can hold the largest entry of x W^T, for an output head
// [n, k] and a few rows of x: greedy decoding needs only that argmax, and on a
// large vocabulary the head is most of a decode step (Gemma 3 270M: 262,144
// rows, half of a 16-sequence step). The caller then computes the float32
// logits of those rows alone, with the product's own kernels, and takes the
// largest: the same token as the full product, ties included.
//
// 1. A copy of W rounded to int8 per row (scale s_j = max|w_j| / 127, error
//    e_j = max|w_jk - s_j q_jk|), and x rounded to int16 per row (scale t_i,
//    error r_i), give each row of W a score a_ij = s_j t_i sum q_jk p_ik in
//    exact int32 sums: two vpmaddwd per 32 products and no FMA chain, 1.6 to
//    1.7 times the float32 tiles' rate at 16 rows on AVX2 (whose 8 FMA
//    chains a tile hold it to half the FMA peak; BM_HeadScreen against
//    BM_MatmulQuant). With AVX-512 VNNI, one vpdpwssd per 32 products and
//    row (about 1.15 times the AVX2 dots on Gemma 3's head). With VNNI and
//    VBMI, x is rounded to int8 instead, but for the step's 32 channels with
//    the largest |x| (a final norm's large values sit in a few channels that
//    every row shares), which stay int16 on the same scale: one vpdpbusd per
//    64 products and row, W's 32 values at those channels gathered once per
//    row of W with vpermb. r_i grows from max|x_i| / 65534 to about the int8
//    step of the other channels: on real final-norm outputs a few more
//    candidates (SmolLM2: mean 18 against 5 a row of x; Gemma 3: p90 68
//    against 17), and 10-15% off the screening (docs/benchmarks.md).
// 2. |a_ij - L_ij| <= B_ij for the float32 logit L_ij, with
//      B_ij = (r_i + c_i) (S_j + k e_j) + e_j |x_i|_1,
//    S_j >= sum_k |w_jk|, c_i = (k + 64) 2^-24 (|x_i|max + r_i) for the
//    rounding of the float32 sum (at most k products in one chain, the scalar
//    tiles' worst case) and of the score; every term is rounded up.
// 3. Only rows with a_ij + B_ij >= max_l (a_il - B_il) can hold the maximum,
//    every row tied with it included.
// A loose bound costs only more candidates: a row of x with more than n / 8
// of them gets none, meaning "compute the whole row".
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/parallel.h"

namespace loom::kernels::cpu {

class HeadScreen {
 public:
  // Writes rows [begin, begin + count) of W in float32 (the values the
  // product multiplies) to out.
  using RowSource = std::function<void(int64_t begin, int64_t count, float* out)>;

  // The screening copy of W [n, k], or an empty screen (Ready() false) when
  // k is not a multiple of 32, is above kMaxK, or W holds a non-finite value.
  static HeadScreen Build(int32_t n, int32_t k, const RowSource& rows, ParallelFor& pool);

  // Past this k an int32 sum of k products of int8 and int16 could overflow.
  static constexpr int32_t kMaxK = 4096;

  bool Ready() const { return n_ > 0; }
  int64_t NumBytes() const;

  // For each of the m rows of x (row stride ldx): the rows of W, ascending,
  // that can hold its largest logit, or an empty list where there are more
  // than n / 8. False, with out unchanged, when x holds a non-finite value.
  bool Candidates(const float* x, int32_t m, int32_t ldx, ParallelFor& pool,
                  std::vector<std::vector<int32_t>>& out) const;

 private:
  struct RowCandidates;
  struct Int8X;
  // Rounds x to int16 and scores every row of W with ScanAvx2 (or scalar
  // code), merging each task's candidates; false for a non-finite x.
  bool ScanInt16(const float* x, int32_t m, int32_t ldx, ParallelFor& pool,
                 const std::function<void(const std::vector<RowCandidates>&)>& merge) const;
  // Scores rows [begin, end) of W against the m rows of x rounded to int16
  // (p, scales t, bound coefficients) with AVX2, its dots with AVX-512 VNNI
  // where the CPU has it, into local.
  void ScanAvx2(const int16_t* p, const float* t, const float* coef_w, const float* coef_e,
                int32_t m, int64_t begin, int64_t end, std::vector<RowCandidates>& local) const;

  // The int8 screen (AVX-512 VNNI and VBMI): x rounded to int8 but for its
  // largest channels, one vpdpbusd per 64 products.
  void ScanVnni8(const Int8X& x, int64_t begin, int64_t end,
                 std::vector<RowCandidates>& local) const;

  int32_t n_ = 0;
  int32_t k_ = 0;
  std::vector<int8_t> q_;         // [n, k]
  std::vector<float> scale_;      // [n] s_j
  std::vector<float> err_;        // [n] e_j
  std::vector<float> weight_;     // [n] S_j + k e_j
  std::vector<int32_t> row_sum_;  // [n] sum_k q_jk
};

}  // namespace loom::kernels::cpu
