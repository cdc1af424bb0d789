// vulkan_target: a program of ours (not linked to matrix-cpp or Vulkan) for
// vulkan_e2e_test. Its main thread waits in poll() (the event loop). It
// dlopen()s the Vulkan loader RTLD_LOCAL (as SDL, GLFW and volk do), so the
// loader is not in the global scope, and gets every function through
// vkGetInstanceProcAddr (found by dlsym on its handle); vkQueuePresentKHR
// through vkGetDeviceProcAddr (itself from vkGetInstanceProcAddr). It draws
// nothing: 100 presents of a swapchain on a small X window (VK_KHR_xcb_surface:
// lavapipe in Debian 12's Mesa 22.3 has no VK_EXT_headless_surface), each
// image acquired with a fence:
//   main     the main thread presents, one present per loop iteration
//   thread   a render thread presents every 20 ms while the main thread
//            polls every 2 ms
// and prints "presents N" (the presents that returned VK_SUCCESS or
// VK_SUBOPTIMAL_KHR) before exiting. Exit status 3 and a line on stderr when
// a Vulkan call fails.
#define _GNU_SOURCE  // pthread_tryjoin_np
#define VK_NO_PROTOTYPES
#define VK_USE_PLATFORM_XCB_KHR
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <xcb/xcb.h>
#include <vulkan/vulkan.h>

enum { kPresents = 100 };

static PFN_vkAcquireNextImageKHR g_acquire;
static PFN_vkWaitForFences g_wait;
static PFN_vkResetFences g_reset;
static PFN_vkQueuePresentKHR g_present;
static VkDevice g_device;
static VkQueue g_queue;
static VkSwapchainKHR g_swapchain;
static VkFence g_fence;
static atomic_long g_presents;

// Returns 3 from the calling function, with a line, when `call` fails.
#define CHECK(call)                                                 \
  do {                                                              \
    VkResult result_ = (call);                                      \
    if (result_ != VK_SUCCESS) {                                    \
      fprintf(stderr, "vulkan_target: %s: %d\n", #call, result_);  \
      return 3;                                                     \
    }                                                               \
  } while (0)

static void SleepMs(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

// One frame: acquire an image (waiting for its fence), present it.
static int PresentOnce(void) {
  uint32_t index = 0;
  CHECK(g_acquire(g_device, g_swapchain, UINT64_MAX, VK_NULL_HANDLE, g_fence, &index));
  CHECK(g_wait(g_device, 1, &g_fence, VK_TRUE, UINT64_MAX));
  CHECK(g_reset(g_device, 1, &g_fence));
  VkPresentInfoKHR info = {.sType = VK_STRUCTURE_TYPE_PRESENT_INFO_KHR,
                           .swapchainCount = 1,
                           .pSwapchains = &g_swapchain,
                           .pImageIndices = &index};
  const VkResult result = g_present(g_queue, &info);
  if (result != VK_SUCCESS && result != VK_SUBOPTIMAL_KHR) {
    fprintf(stderr, "vulkan_target: vkQueuePresentKHR: %d\n", result);
    return 3;
  }
  atomic_fetch_add(&g_presents, 1);
  return 0;
}

static void* RenderThread(void* arg) {
  (void)arg;
  for (int i = 0; i < kPresents; ++i) {
    SleepMs(20);
    if (PresentOnce() != 0) break;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* vulkan = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (vulkan == NULL) return 4;
  PFN_vkGetInstanceProcAddr gipa =
      (PFN_vkGetInstanceProcAddr)dlsym(vulkan, "vkGetInstanceProcAddr");
  if (gipa == NULL) return 4;
  poll(NULL, 0, 1);  // The event loop's first wait.
  xcb_connection_t* x = xcb_connect(NULL, NULL);
  if (xcb_connection_has_error(x)) return 5;
  xcb_screen_t* screen = xcb_setup_roots_iterator(xcb_get_setup(x)).data;
  const xcb_window_t window = xcb_generate_id(x);
  xcb_create_window(x, XCB_COPY_FROM_PARENT, window, screen->root, 0, 0, 64, 64, 0,
                    XCB_WINDOW_CLASS_INPUT_OUTPUT, screen->root_visual, 0, NULL);
  xcb_map_window(x, window);
  xcb_flush(x);

  PFN_vkCreateInstance create_instance = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
  const char* instance_extensions[] = {"VK_KHR_surface", "VK_KHR_xcb_surface"};
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .apiVersion = VK_API_VERSION_1_0};
  VkInstanceCreateInfo instance_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                        .pApplicationInfo = &app,
                                        .enabledExtensionCount = 2,
                                        .ppEnabledExtensionNames = instance_extensions};
  VkInstance instance;
  CHECK(create_instance(&instance_info, NULL, &instance));
#define INSTANCE_FN(name) PFN_##name name = (PFN_##name)gipa(instance, #name)
  INSTANCE_FN(vkCreateXcbSurfaceKHR);
  INSTANCE_FN(vkEnumeratePhysicalDevices);
  INSTANCE_FN(vkGetPhysicalDeviceSurfaceSupportKHR);
  INSTANCE_FN(vkGetPhysicalDeviceSurfaceCapabilitiesKHR);
  INSTANCE_FN(vkGetPhysicalDeviceSurfaceFormatsKHR);
  INSTANCE_FN(vkCreateDevice);
  INSTANCE_FN(vkGetDeviceProcAddr);
  if (vkCreateXcbSurfaceKHR == NULL || vkGetDeviceProcAddr == NULL) return 4;

  VkXcbSurfaceCreateInfoKHR surface_info = {.sType = VK_STRUCTURE_TYPE_XCB_SURFACE_CREATE_INFO_KHR,
                                            .connection = x,
                                            .window = window};
  VkSurfaceKHR surface;
  CHECK(vkCreateXcbSurfaceKHR(instance, &surface_info, NULL, &surface));
  uint32_t count = 1;
  VkPhysicalDevice gpu;
  VkResult enumerated = vkEnumeratePhysicalDevices(instance, &count, &gpu);
  if (enumerated != VK_SUCCESS && enumerated != VK_INCOMPLETE) return 3;
  VkBool32 supported = VK_FALSE;
  CHECK(vkGetPhysicalDeviceSurfaceSupportKHR(gpu, 0, surface, &supported));
  if (!supported) return 3;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                        .queueFamilyIndex = 0,
                                        .queueCount = 1,
                                        .pQueuePriorities = &priority};
  const char* device_extensions[] = {"VK_KHR_swapchain"};
  VkDeviceCreateInfo device_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                    .queueCreateInfoCount = 1,
                                    .pQueueCreateInfos = &queue_info,
                                    .enabledExtensionCount = 1,
                                    .ppEnabledExtensionNames = device_extensions};
  CHECK(vkCreateDevice(gpu, &device_info, NULL, &g_device));
#define DEVICE_FN(name) PFN_##name name = (PFN_##name)vkGetDeviceProcAddr(g_device, #name)
  DEVICE_FN(vkGetDeviceQueue);
  DEVICE_FN(vkCreateSwapchainKHR);
  DEVICE_FN(vkCreateFence);
  g_acquire = (PFN_vkAcquireNextImageKHR)vkGetDeviceProcAddr(g_device, "vkAcquireNextImageKHR");
  g_wait = (PFN_vkWaitForFences)vkGetDeviceProcAddr(g_device, "vkWaitForFences");
  g_reset = (PFN_vkResetFences)vkGetDeviceProcAddr(g_device, "vkResetFences");
  g_present = (PFN_vkQueuePresentKHR)vkGetDeviceProcAddr(g_device, "vkQueuePresentKHR");
  if (g_present == NULL) return 4;
  vkGetDeviceQueue(g_device, 0, 0, &g_queue);

  VkSurfaceCapabilitiesKHR caps;
  CHECK(vkGetPhysicalDeviceSurfaceCapabilitiesKHR(gpu, surface, &caps));
  VkSurfaceFormatKHR format;
  count = 1;
  const VkResult formats = vkGetPhysicalDeviceSurfaceFormatsKHR(gpu, surface, &count, &format);
  if (formats != VK_SUCCESS && formats != VK_INCOMPLETE) return 3;
  VkExtent2D extent = caps.currentExtent;
  if (extent.width == UINT32_MAX) extent = (VkExtent2D){64, 64};  // The window's.
  VkSwapchainCreateInfoKHR swapchain_info = {
      .sType = VK_STRUCTURE_TYPE_SWAPCHAIN_CREATE_INFO_KHR,
      .surface = surface,
      .minImageCount = caps.minImageCount,
      .imageFormat = format.format,
      .imageColorSpace = format.colorSpace,
      .imageExtent = extent,
      .imageArrayLayers = 1,
      .imageUsage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT,
      .imageSharingMode = VK_SHARING_MODE_EXCLUSIVE,
      .preTransform = caps.currentTransform,
      .compositeAlpha = VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR,
      .presentMode = VK_PRESENT_MODE_FIFO_KHR,
      .clipped = VK_TRUE};
  CHECK(vkCreateSwapchainKHR(g_device, &swapchain_info, NULL, &g_swapchain));
  VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  CHECK(vkCreateFence(g_device, &fence_info, NULL, &g_fence));

  if (strcmp(argv[1], "thread") == 0) {
    pthread_t thread;
    pthread_create(&thread, NULL, &RenderThread, NULL);
    while (atomic_load(&g_presents) < kPresents) {
      poll(NULL, 0, 2);
      if (pthread_tryjoin_np(thread, NULL) == 0) break;  // It failed.
    }
    pthread_join(thread, NULL);
  } else {
    for (int i = 0; i < kPresents; ++i) {
      poll(NULL, 0, 2);
      if (PresentOnce() != 0) break;
    }
  }
  poll(NULL, 0, 2);  // The dispatch after the last present ends.
  printf("presents %ld\n", atomic_load(&g_presents));
  fflush(stdout);
  // No clean-up: the process exits (the loader's and lavapipe's teardown is
  // not what is tested).
  return atomic_load(&g_presents) == kPresents ? 0 : 3;
}
