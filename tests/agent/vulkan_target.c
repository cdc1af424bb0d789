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

// What main sets up, in order: the loader, the window, the instance and the
// functions it gives, the surface, the physical device and the device's
// functions the swapchain needs.
struct Setup {
  PFN_vkGetInstanceProcAddr gipa;
  xcb_connection_t* x;
  xcb_window_t window;
  VkInstance instance;
  PFN_vkCreateXcbSurfaceKHR vkCreateXcbSurfaceKHR;
  PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices;
  PFN_vkGetPhysicalDeviceSurfaceSupportKHR vkGetPhysicalDeviceSurfaceSupportKHR;
  PFN_vkGetPhysicalDeviceSurfaceCapabilitiesKHR vkGetPhysicalDeviceSurfaceCapabilitiesKHR;
  PFN_vkGetPhysicalDeviceSurfaceFormatsKHR vkGetPhysicalDeviceSurfaceFormatsKHR;
  PFN_vkCreateDevice vkCreateDevice;
  PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
  VkSurfaceKHR surface;
  VkPhysicalDevice gpu;
  PFN_vkCreateSwapchainKHR vkCreateSwapchainKHR;
  PFN_vkCreateFence vkCreateFence;
};

// The loader, dlopen()ed RTLD_LOCAL, and its vkGetInstanceProcAddr.
static int LoadVulkan(struct Setup* s) {
  void* vulkan = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (vulkan == NULL) return 4;
  s->gipa = (PFN_vkGetInstanceProcAddr)dlsym(vulkan, "vkGetInstanceProcAddr");
  return s->gipa == NULL ? 4 : 0;
}

// A small mapped X window to present to.
static int OpenWindow(struct Setup* s) {
  s->x = xcb_connect(NULL, NULL);
  if (xcb_connection_has_error(s->x)) return 5;
  xcb_screen_t* screen = xcb_setup_roots_iterator(xcb_get_setup(s->x)).data;
  s->window = xcb_generate_id(s->x);
  xcb_create_window(s->x, XCB_COPY_FROM_PARENT, s->window, screen->root, 0, 0, 64, 64, 0,
                    XCB_WINDOW_CLASS_INPUT_OUTPUT, screen->root_visual, 0, NULL);
  xcb_map_window(s->x, s->window);
  xcb_flush(s->x);
  return 0;
}

// The instance (with the XCB surface extensions) and its functions.
static int CreateInstance(struct Setup* s) {
  PFN_vkCreateInstance create_instance = (PFN_vkCreateInstance)s->gipa(NULL, "vkCreateInstance");
  const char* instance_extensions[] = {"VK_KHR_surface", "VK_KHR_xcb_surface"};
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .apiVersion = VK_API_VERSION_1_0};
  VkInstanceCreateInfo instance_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                        .pApplicationInfo = &app,
                                        .enabledExtensionCount = 2,
                                        .ppEnabledExtensionNames = instance_extensions};
  CHECK(create_instance(&instance_info, NULL, &s->instance));
#define INSTANCE_FN(name) s->name = (PFN_##name)s->gipa(s->instance, #name)
  INSTANCE_FN(vkCreateXcbSurfaceKHR);
  INSTANCE_FN(vkEnumeratePhysicalDevices);
  INSTANCE_FN(vkGetPhysicalDeviceSurfaceSupportKHR);
  INSTANCE_FN(vkGetPhysicalDeviceSurfaceCapabilitiesKHR);
  INSTANCE_FN(vkGetPhysicalDeviceSurfaceFormatsKHR);
  INSTANCE_FN(vkCreateDevice);
  INSTANCE_FN(vkGetDeviceProcAddr);
  if (s->vkCreateXcbSurfaceKHR == NULL || s->vkGetDeviceProcAddr == NULL) return 4;
  return 0;
}

// The window's surface, and the first physical device, which must present
// to it.
static int CreateSurface(struct Setup* s) {
  VkXcbSurfaceCreateInfoKHR surface_info = {.sType = VK_STRUCTURE_TYPE_XCB_SURFACE_CREATE_INFO_KHR,
                                            .connection = s->x,
                                            .window = s->window};
  CHECK(s->vkCreateXcbSurfaceKHR(s->instance, &surface_info, NULL, &s->surface));
  uint32_t count = 1;
  VkResult enumerated = s->vkEnumeratePhysicalDevices(s->instance, &count, &s->gpu);
  if (enumerated != VK_SUCCESS && enumerated != VK_INCOMPLETE) return 3;
  VkBool32 supported = VK_FALSE;
  CHECK(s->vkGetPhysicalDeviceSurfaceSupportKHR(s->gpu, 0, s->surface, &supported));
  return supported ? 0 : 3;
}

// The device with one queue, and the device functions (vkQueuePresentKHR
// among them) through vkGetDeviceProcAddr.
static int CreateDevice(struct Setup* s) {
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
  CHECK(s->vkCreateDevice(s->gpu, &device_info, NULL, &g_device));
  PFN_vkGetDeviceProcAddr gdpa = s->vkGetDeviceProcAddr;
  PFN_vkGetDeviceQueue get_queue = (PFN_vkGetDeviceQueue)gdpa(g_device, "vkGetDeviceQueue");
  s->vkCreateSwapchainKHR = (PFN_vkCreateSwapchainKHR)gdpa(g_device, "vkCreateSwapchainKHR");
  s->vkCreateFence = (PFN_vkCreateFence)gdpa(g_device, "vkCreateFence");
  g_acquire = (PFN_vkAcquireNextImageKHR)gdpa(g_device, "vkAcquireNextImageKHR");
  g_wait = (PFN_vkWaitForFences)gdpa(g_device, "vkWaitForFences");
  g_reset = (PFN_vkResetFences)gdpa(g_device, "vkResetFences");
  g_present = (PFN_vkQueuePresentKHR)gdpa(g_device, "vkQueuePresentKHR");
  if (g_present == NULL) return 4;
  get_queue(g_device, 0, 0, &g_queue);
  return 0;
}

// The swapchain on the surface (FIFO, the surface's size or the window's)
// and the fence each acquire waits for.
static int CreateSwapchain(struct Setup* s) {
  VkSurfaceCapabilitiesKHR caps;
  CHECK(s->vkGetPhysicalDeviceSurfaceCapabilitiesKHR(s->gpu, s->surface, &caps));
  VkSurfaceFormatKHR format;
  uint32_t count = 1;
  const VkResult formats =
      s->vkGetPhysicalDeviceSurfaceFormatsKHR(s->gpu, s->surface, &count, &format);
  if (formats != VK_SUCCESS && formats != VK_INCOMPLETE) return 3;
  VkExtent2D extent = caps.currentExtent;
  if (extent.width == UINT32_MAX) extent = (VkExtent2D){64, 64};  // The window's.
  VkSwapchainCreateInfoKHR swapchain_info = {
      .sType = VK_STRUCTURE_TYPE_SWAPCHAIN_CREATE_INFO_KHR,
      .surface = s->surface,
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
  CHECK(s->vkCreateSwapchainKHR(g_device, &swapchain_info, NULL, &g_swapchain));
  VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  CHECK(s->vkCreateFence(g_device, &fence_info, NULL, &g_fence));
  return 0;
}

// The presents: by a render thread ("thread") while the main thread polls,
// or by the main thread, one per loop iteration.
static void Present(const char* mode) {
  if (strcmp(mode, "thread") == 0) {
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
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  struct Setup setup = {0};
  int status = LoadVulkan(&setup);
  if (status != 0) return status;
  poll(NULL, 0, 1);  // The event loop's first wait.
  if ((status = OpenWindow(&setup)) != 0 || (status = CreateInstance(&setup)) != 0 ||
      (status = CreateSurface(&setup)) != 0 || (status = CreateDevice(&setup)) != 0 ||
      (status = CreateSwapchain(&setup)) != 0) {
    return status;
  }
  Present(argv[1]);
  poll(NULL, 0, 2);  // The dispatch after the last present ends.
  printf("presents %ld\n", atomic_load(&g_presents));
  fflush(stdout);
  // No clean-up: the process exits (the loader's and lavapipe's teardown is
  // not what is tested).
  return atomic_load(&g_presents) == kPresents ? 0 : 3;
}
