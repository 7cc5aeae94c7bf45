import Concord
import ConcordSQLite
import Foundation
import TestSupport
import Testing

@Suite("Persistence under concurrency: 8 writers, a flush, a restart")
struct PersistenceConcurrencyTests {
  @Test("Every last value written by 8 concurrent tasks is there after a restart")
  func concurrentWritersThenRestart() async throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let tasks = 8
    let steps = max(200, randomSteps(share: 200))
    // Each task owns its notes (so it knows their last values) and shares the issues' users,
    // written with increasing stamps: the highest stamp must win.
    let finals = await withTaskGroup(of: [String: String?].self) { group in
      for task in 0..<tasks {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(task) &+ 0xC0C0)
          var last: [String: String?] = [:]
          var held: [EntityObserver<Note>] = []
          for step in 0..<steps {
            let id = "t\(task)-\(Int.random(in: 0..<40, using: &generator))"
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<4:
              let text = "\(step)"
              let handle = map.store(Note(id: id, text: text))
              if Bool.random(using: &generator) { held.append(handle) }
              last[id] = text
            case 4..<6:
              if map.update(Note.self, id: id, { $0.text += "+" }) {
                last[id] = (last[id] ?? nil).map { $0 + "+" }
              }
            case 6:
              map.remove(Note.self, id: id)
              last[id] = .some(nil)
            case 7:
              let issue = Issue.make(
                task * 1_000 + step % 20, at: Double(step), userID: step % 5)
              _ = map.store(issue)
              _ = map.store(User(id: step % 5, login: "u", updatedAt: Double(step * tasks + task)))
            case 8:
              // A read-through find agrees with what this task last wrote.
              let found = map.find(Note.self, id: id)?.value.text
              if let expected = last[id] { #expect(found == expected) }
            default:
              if !held.isEmpty { held.removeFirst() }
            }
          }
          return last
        }
      }
      var merged: [String: String?] = [:]
      for await part in group { merged.merge(part) { $1 } }
      return merged
    }
    try map.flush()
    let restarted = try launch(directory.database)
    for (id, text) in finals {
      #expect(restarted.find(Note.self, id: id)?.value.text == text, "note \(id)")
    }
    // Each shared user ends with the value of the highest stamp written to it.
    for userID in 0..<5 {
      let user = map.find(User.self, id: userID)?.value
      #expect(restarted.find(User.self, id: userID)?.value == user)
    }
  }
}
