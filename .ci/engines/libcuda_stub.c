/* A one-function stand-in for libcuda.so.1 on a machine with no GPU driver.
 * SGLang's CPU engine still imports sgl_kernel, whose common_ops.abi3.so links one driver symbol,
 * cuPointerGetAttribute; the CPU code paths never call it. Answering CUDA_ERROR_NO_DEVICE (100)
 * keeps any caller that does ask honest. */
int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr) {
    (void)data; (void)attribute; (void)ptr;
    return 100;
}
