// out[i] = a * x[i] + y[i] for i < n: the sample kernel of the cuda backend.
// The backend passes the batch's element count as n, a as a constant from config.pbtxt
// (kernel_args "count, fp32:2.0, input:X, input:Y, output:OUT"), and device pointers to the
// batch's X, Y and OUT. extern "C" keeps the entry name unmangled ("saxpy").
// Regenerate saxpy.ptx beside this file with ../gen-ptx.sh.
extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x, const float* __restrict__ y,
                                 float* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a * x[i] + y[i];
    }
}
