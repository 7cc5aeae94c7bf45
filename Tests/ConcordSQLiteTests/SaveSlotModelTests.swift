import Concord
import ConcordSQLite
import Foundation
import TestSupport
import Testing

// Save slots against a model: random stamped writes, removals, saves to three slots, restores,
// resets and restarts, on a map persisting notes, with handles held and a live query open. After
// each step every note the map finds, every held handle, the query and the tombstones' verdicts
// must be what the model says: a restore brings back a slot's notes and tombstones exactly,
// whatever was written since; a handle survives a restore only if its note is in the slot.

/// What the persisted state is: each note's text and stamp, and each removed note's tombstone.
private struct State {
  var notes: [String: (text: String, stamp: Double)] = [:]
  var tombstones: [String: Double] = [:]

  /// Whether a write of `id` stamped `stamp` applies: newer than the note, or than its
  /// tombstone.
  func admits(_ id: String, _ stamp: Double) -> Bool {
    if let note = notes[id] { return stamp > note.stamp }
    if let tombstone = tombstones[id] { return stamp > tombstone }
    return true
  }
}

@Suite("Save slots: a seeded run against a model")
struct SaveSlotModelTests {
  @Test(
    "Writes, removals, saves, restores, resets and restarts agree with the model",
    arguments: [1, 2, 3] as [UInt64])
  func aSeededRunAgreesWithTheModel(seed: UInt64) throws {
    var random = SeededGenerator(seed: seed &* 0x51_07)
    let directory = TemporaryDirectory()
    let path = directory.database
    let slots = (0..<3).map { directory.path + "/slot-\($0).sqlite" }
    var map = try launch(path)
    var model = State()
    var saved: [Int: State] = [:]
    // Held handles, each with the generation of its note's node when it was made.
    var held: [(id: String, handle: EntityObserver<Note>, generation: Int)] = []
    var generations: [String: Int] = [:]
    var timeline: EntityObserver<[Note]>? = map.query(Note.self, sortedBy: { $0.id < $1.id })
    var clock = 100.0
    let ids = (0..<10).map { "n\($0)" }

    /// The notes held by handles whose node is still the live one.
    func liveHeld() -> Set<String> {
      Set(held.filter { generations[$0.id, default: 0] == $0.generation }.map(\.id))
    }
    /// The notes a change of state from `model` to `next` takes out of memory: held, and
    /// gone or replaced by another node.
    func dropRemoved(to next: State) {
      for id in liveHeld() where next.notes[id] == nil { generations[id, default: 0] += 1 }
    }

    let steps = max(60, randomSteps(share: 400))
    for step in 0..<steps {
      clock += 1
      let context = "seed \(seed), step \(step)"
      switch Int.random(in: 0..<100, using: &random) {
      case 0..<40:
        let id = ids.randomElement(using: &random)!
        let stamp =
          Bool.random(using: &random)
          ? clock : clock - Double.random(in: 1...30, using: &random).rounded()
        let text = "\(id) at \(step)"
        let handle = map.store(Note(id: id, text: text), modifiedAt: stamp)
        if model.admits(id, stamp) {
          model.notes[id] = (text, stamp)
          model.tombstones[id] = nil
        }
        #expect(handle.isRemoved == (model.notes[id] == nil), "\(context): store \(id)")
        if !handle.isRemoved && Int.random(in: 0..<3, using: &random) == 0 {
          held.append((id, handle, generations[id, default: 0]))
        }
      case 40..<55:
        let id = ids.randomElement(using: &random)!
        map.remove(Note.self, id: id)
        if let note = model.notes.removeValue(forKey: id) {
          model.tombstones[id] = note.stamp
          if liveHeld().contains(id) { generations[id, default: 0] += 1 }
        }
      case 55..<67:
        let slot = Int.random(in: 0..<3, using: &random)
        try map.save(to: slots[slot])
        saved[slot] = model
      case 67..<80:
        let slot = Int.random(in: 0..<3, using: &random)
        guard let state = saved[slot] else {
          let error = #expect(throws: SQLiteStore.Error.self) { try map.restore(from: slots[slot]) }
          #expect(error?.kind == .missingFile, "\(context): a slot never saved")
          break
        }
        try map.restore(from: slots[slot])
        dropRemoved(to: state)
        model = state
      case 80..<85:
        try map.reset()
        dropRemoved(to: State())
        model = State()
      case 85..<92:
        // A restart: what was committed is on disk once flushed; memory starts empty.
        try map.flush()
        held.removeAll()
        timeline = nil
        map = try launch(path)
        timeline = map.query(Note.self, sortedBy: { $0.id < $1.id })
        generations = generations.mapValues { $0 + 1 }
      default:
        if !held.isEmpty { held.remove(at: Int.random(in: 0..<held.count, using: &random)) }
      }

      // Every note is what the model says, found from memory or the store.
      for id in ids {
        #expect(
          map.find(Note.self, id: id)?.value.text == model.notes[id]?.text, "\(context): \(id)")
      }
      for (id, handle, generation) in held {
        let live = generations[id, default: 0] == generation
        #expect(handle.isRemoved == !live, "\(context): handle on \(id)")
        if live {
          #expect(handle.value.text == model.notes[id]?.text, "\(context): handle on \(id)")
        }
      }
      #expect(
        timeline?.value.map(\.id) == model.notes.keys.sorted(), "\(context): the live query")
      // The tombstones: a write as old as one is refused (and leaves nothing behind).
      if let (id, tombstone) = model.tombstones.randomElement(using: &random) {
        let replay = map.store(Note(id: id, text: "replayed"), modifiedAt: tombstone)
        #expect(replay.isRemoved, "\(context): the tombstone of \(id) refuses a replay")
        #expect(map.find(Note.self, id: id) == nil)
      }
    }
  }
}
