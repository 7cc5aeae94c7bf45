// Cycle numbers: which nodes lie on a cycle by identity, and which cycle.
//
// A cycle can only close through a link a write just made. So after a pass relinks, the graph
// below the children it linked is searched for strongly connected parts (Tarjan's algorithm,
// with an explicit stack), and each part of two or more nodes, or a node linked to itself,
// gets a fresh number shared by its members. `_Node+Materialize.swift` unfolds a value only through
// children with its own number.
//
// Numbers are never cleared while a node lives: a node whose cycle was later broken keeps its
// number, and its value is then unfolded the slow way, with the same result.
//
// - Complexity: O(nodes and links reachable from the linked children). A pass whose children
//   hold no entities of their own (pages of plain entities, the common case) searches nothing.

extension _Pass {
  /// Numbers the cycles that the links made since the last call may close: the pass's, or a
  /// rollback's (`buffers.cycleRoots`).
  @inlinable
  func numberNewCycles() {
    guard !buffers.cycleRoots.isEmpty else { return }
    numberCycles(from: buffers.cycleRoots)
    buffers.cycleRoots.removeAll(keepingCapacity: true)
  }

  /// Numbers the cycles reachable from `roots`, children the current pass linked.
  @usableFromInline
  func numberCycles(from roots: [_AnyNode]) {
    var order: [ObjectIdentifier: (index: Int, low: Int)] = [:]
    var stack: [_AnyNode] = []
    var onStack: Set<ObjectIdentifier> = []
    var calls: [(node: _AnyNode, next: Int)] = []

    func enter(_ node: _AnyNode) {
      let key = ObjectIdentifier(node)
      order[key] = (order.count, order.count)
      stack.append(node)
      onStack.insert(key)
      calls.append((node, 0))
    }

    for root in roots where order[ObjectIdentifier(root)] == nil {
      enter(root)
      while let (node, next) = calls.last {
        let key = ObjectIdentifier(node)
        let children = node.children
        if next < children.count {
          calls[calls.count - 1].next = next + 1
          let child = children[next].child
          let childKey = ObjectIdentifier(child)
          if let reached = order[childKey] {
            if onStack.contains(childKey) { order[key]!.low = min(order[key]!.low, reached.index) }
          } else {
            enter(child)
          }
          continue
        }
        calls.removeLast()
        let mine = order[key]!
        if let caller = calls.last {
          let callerKey = ObjectIdentifier(caller.node)
          order[callerKey]!.low = min(order[callerKey]!.low, mine.low)
        }
        guard mine.low == mine.index else { continue }
        var members: [_AnyNode] = []
        repeat {
          let member = stack.removeLast()
          onStack.remove(ObjectIdentifier(member))
          members.append(member)
        } while members.last !== node
        guard members.count > 1 || children.contains(where: { $0.child === node }) else { continue }
        lastCycle += 1
        for member in members { member.extras.cycle = lastCycle }
      }
    }
  }
}
