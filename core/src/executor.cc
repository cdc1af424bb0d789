#include "matrix/core/executor.h"

#include "matrix/core/looper.h"

namespace matrix {

LooperExecutor::LooperExecutor(Looper* looper) : handler_(looper, "matrix::LooperExecutor") {}

void LooperExecutor::Execute(Task task) { handler_.Post(std::move(task)); }

InlineExecutor* InlineExecutor::Get() {
  static InlineExecutor* const executor = new InlineExecutor();
  return executor;
}

}  // namespace matrix
