import ConcordSQLite
import Foundation
import Testing

@testable import Concord

// A write from outside to an entity a layer shadows runs one of two ways: journaled, as every
// write under a layer did, or, when the map takes the pass's shortcuts and nothing nests or
// observes the entity, published as it is made (see `_Journal.publishesDirectly`). What a map
// launched later reads from the file must not depend on which.
@Suite("Persistence under optimistic layers")
struct PersistentOptimisticTests {
  /// What a map launched on the file reads of note `n` after each step of a client's session:
  /// a server write under a pending layer, the layer's rollback, a server write after it.
  func session(exhaustive: Bool) throws -> [String?] {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    map._core.pass.isExhaustive = exhaustive
    func stored() throws -> String? {
      try map.flush()
      return try launch(directory.database).find(Note.self, id: "n")?.value.text
    }
    var reads: [String?] = []
    map.store(Note(id: "n", text: "from the server"))
    reads.append(try stored())
    let layer = map.optimistic { $0.update(Note.self, id: "n") { $0.text = "edited" } }
    reads.append(try stored())
    map.store(Note(id: "n", text: "from the server, later"))
    #expect(map.find(Note.self, id: "n")?.value.text == "edited", "the layer stays on top")
    reads.append(try stored())
    layer.rollback()
    reads.append(try stored())
    map.store(Note(id: "n", text: "from the server, last"))
    reads.append(try stored())
    map._core._checkInvariants()
    return reads
  }

  @Test("a write underneath a layer hands the store the same rows with and without shortcuts")
  func sameRowsBothWays() throws {
    let shortcuts = try session(exhaustive: false)
    let exhaustive = try session(exhaustive: true)
    #expect(shortcuts == exhaustive)
    #expect(shortcuts.first == "from the server")
    #expect(shortcuts.last == "from the server, last")
  }
}
