// QML engine hooks of libmatrix-agent.so: registers each Qt QML engine the
// program creates, so that stack captures read its JavaScript frames
// (matrix/trace/qml_frames.h; docs/stacks.md, "QML frames").
//
// No global of libQt6Qml holds its engines. The agent interposes the public
// constructors programs and Qt's own libraries call through the PLT:
// QQmlApplicationEngine (the qml tool, applications), QQmlEngine (QQuickView
// in libQt6Quick, QQuickWidget, applications), QJSEngine, each in its
// complete (C1) and base (C2) variant, and QV4::ExecutionEngine(QJSEngine*)
// (libQt6QmlWorkerScript's WorkerScript engines). libQt6Qml's calls to its
// own constructors are direct (-Bsymbolic-functions), so every engine is
// seen exactly at its outermost public constructor. After the real
// constructor returns, its QV4::ExecutionEngine (QJSEngine::m_v4Engine) is
// registered with RegisterQmlEngine(), which checks the library version and
// probes the layout: with any Qt but 6.4.2 nothing is registered.
//
// It also interposes QCoreApplication::exec() (Qt 5 and 6 share the symbol,
// which QGuiApplication::exec() and QApplication::exec() call across
// libraries): when the loop returns, the reports in flight are delivered
// before the program destroys its engines (FlushAtLoopReturn), so that a
// slow handler that quit the loop keeps its JavaScript names.
//
// Thread safety: the constructors may run on any thread; the registry is
// lock-free for the capture handler. exec() runs on the main thread.

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "exit_hooks.h"
#include "matrix/trace/qml_frames.h"
#include "present_hooks.h"  // Resolve, RealDlsym

#define MATRIX_AGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace matrix::agent {
namespace {

// The real function `name`: the next definition after the agent's, else
// (a library loaded RTLD_LOCAL is not in the global scope RTLD_NEXT
// searches) the first of `libraries` loaded that defines it. A function that
// cannot be found cannot be skipped: the program stops with a message.
template <typename Fn>
Fn RealQtFunction(std::atomic<Fn>& slot, const char* name,
                  std::initializer_list<const char*> libraries) {
  Fn fn = Resolve(slot, name);
  if (fn != nullptr) return fn;
  for (const char* library : libraries) {
    void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    fn = reinterpret_cast<Fn>(RealDlsym(handle, name));
    dlclose(handle);  // RTLD_NOLOAD took a reference; the program keeps its own.
    if (fn == nullptr) continue;
    slot.store(fn, std::memory_order_relaxed);
    break;
  }
  if (fn == nullptr) {
    fprintf(stderr, "matrix-agent: %s not found\n", name);
    abort();
  }
  return fn;
}

// The real constructor `name`, libQt6Qml's.
template <typename Fn>
Fn RealConstructor(std::atomic<Fn>& slot, const char* name) {
  return RealQtFunction(slot, name, {"libQt6Qml.so.6"});
}

void RegisterJsEngine(void* js_engine) {
  const auto js = reinterpret_cast<uintptr_t>(js_engine);
  RegisterQmlEngine(js, QmlEngineOf(js));
}

using Ctor0 = void (*)(void*);
using Ctor1 = void (*)(void*, void*);
using Ctor2 = void (*)(void*, void*, void*);
using ExecFn = int (*)();

}  // namespace
}  // namespace matrix::agent

namespace ma = matrix::agent;

// Itanium C++ ABI constructors: (this, arguments...), returning nothing.
#define MATRIX_QML_CTOR0(symbol)                 \
  MATRIX_AGENT_EXPORT void symbol(void* self) {  \
    static std::atomic<ma::Ctor0> real{nullptr}; \
    ma::RealConstructor(real, #symbol)(self);    \
    ma::RegisterJsEngine(self);                  \
  }
#define MATRIX_QML_CTOR1(symbol)                         \
  MATRIX_AGENT_EXPORT void symbol(void* self, void* a) { \
    static std::atomic<ma::Ctor1> real{nullptr};         \
    ma::RealConstructor(real, #symbol)(self, a);         \
    ma::RegisterJsEngine(self);                          \
  }
#define MATRIX_QML_CTOR2(symbol)                                  \
  MATRIX_AGENT_EXPORT void symbol(void* self, void* a, void* b) { \
    static std::atomic<ma::Ctor2> real{nullptr};                  \
    ma::RealConstructor(real, #symbol)(self, a, b);               \
    ma::RegisterJsEngine(self);                                   \
  }

// QJSEngine(), QJSEngine(QObject*), QJSEngine(QJSEnginePrivate&, QObject*).
MATRIX_QML_CTOR0(_ZN9QJSEngineC1Ev)
MATRIX_QML_CTOR0(_ZN9QJSEngineC2Ev)
MATRIX_QML_CTOR1(_ZN9QJSEngineC1EP7QObject)
MATRIX_QML_CTOR1(_ZN9QJSEngineC2EP7QObject)
MATRIX_QML_CTOR2(_ZN9QJSEngineC1ER16QJSEnginePrivateP7QObject)
MATRIX_QML_CTOR2(_ZN9QJSEngineC2ER16QJSEnginePrivateP7QObject)
// QQmlEngine(QObject*), QQmlEngine(QQmlEnginePrivate&, QObject*).
MATRIX_QML_CTOR1(_ZN10QQmlEngineC1EP7QObject)
MATRIX_QML_CTOR1(_ZN10QQmlEngineC2EP7QObject)
MATRIX_QML_CTOR2(_ZN10QQmlEngineC1ER17QQmlEnginePrivateP7QObject)
MATRIX_QML_CTOR2(_ZN10QQmlEngineC2ER17QQmlEnginePrivateP7QObject)
// QQmlApplicationEngine(QObject*).
MATRIX_QML_CTOR1(_ZN21QQmlApplicationEngineC1EP7QObject)
MATRIX_QML_CTOR1(_ZN21QQmlApplicationEngineC2EP7QObject)
// QQmlApplicationEngine(const QUrl&, QObject*) and (const QString&,
// QObject*) load their file inside the constructor, so its JavaScript would
// run before the engine is known. They are QQmlApplicationEngine(QObject*)
// followed by load(url) or load(filePath) (Qt's qqmlapplicationengine.cpp;
// the 6.4.2 binary does exactly that): the agent does the same, registering
// the engine in between.
#define MATRIX_QML_APP_CTOR(symbol, load_symbol)                                       \
  MATRIX_AGENT_EXPORT void symbol(void* self, void* file, void* parent) {              \
    static std::atomic<ma::Ctor1> real{nullptr};                                       \
    static std::atomic<ma::Ctor1> load{nullptr};                                       \
    ma::RealConstructor(real, "_ZN21QQmlApplicationEngineC2EP7QObject")(self, parent); \
    ma::RegisterJsEngine(self);                                                        \
    ma::RealConstructor(load, load_symbol)(self, file);                                \
  }
MATRIX_QML_APP_CTOR(_ZN21QQmlApplicationEngineC1ERK4QUrlP7QObject,
                    "_ZN21QQmlApplicationEngine4loadERK4QUrl")
MATRIX_QML_APP_CTOR(_ZN21QQmlApplicationEngineC2ERK4QUrlP7QObject,
                    "_ZN21QQmlApplicationEngine4loadERK4QUrl")
MATRIX_QML_APP_CTOR(_ZN21QQmlApplicationEngineC1ERK7QStringP7QObject,
                    "_ZN21QQmlApplicationEngine4loadERK7QString")
MATRIX_QML_APP_CTOR(_ZN21QQmlApplicationEngineC2ERK7QStringP7QObject,
                    "_ZN21QQmlApplicationEngine4loadERK7QString")

// QV4::ExecutionEngine(QJSEngine*): `self` is the engine; `js_engine` is
// null for a WorkerScript's.
#define MATRIX_QML_V4_CTOR(symbol)                                    \
  MATRIX_AGENT_EXPORT void symbol(void* self, void* js_engine) {      \
    static std::atomic<ma::Ctor1> real{nullptr};                      \
    ma::RealConstructor(real, #symbol)(self, js_engine);              \
    matrix::RegisterQmlEngine(reinterpret_cast<uintptr_t>(js_engine), \
                              reinterpret_cast<uintptr_t>(self));     \
  }
MATRIX_QML_V4_CTOR(_ZN3QV415ExecutionEngineC1EP9QJSEngine)
MATRIX_QML_V4_CTOR(_ZN3QV415ExecutionEngineC2EP9QJSEngine)

// static int QCoreApplication::exec(): the loop's return is the last moment
// the program's engines surely live.
MATRIX_AGENT_EXPORT int _ZN16QCoreApplication4execEv() {
  static std::atomic<ma::ExecFn> real{nullptr};
  const int result = ma::RealQtFunction(real, "_ZN16QCoreApplication4execEv",
                                        {"libQt6Core.so.6", "libQt5Core.so.5"})();
  ma::FlushAtLoopReturn();
  return result;
}
