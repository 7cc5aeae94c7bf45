// The "Testing with ConcordTesting" article's example, line for line; `.ci/check-readme` checks
// that every line of it is in this target. `Author` is declared in QuickStartTests.swift.

import Concord
import ConcordTesting
import Testing

struct AuthorResponse: Sendable {
  var author: Author
  var updatedAt: Stamp
}

final class AuthorRepository: Sendable {
  let map: IdentityMap
  let api: @Sendable (Int) async throws -> AuthorResponse

  init(map: IdentityMap, api: @escaping @Sendable (Int) async throws -> AuthorResponse) {
    self.map = map
    self.api = api
  }

  func author(_ id: Int) async throws -> EntityObserver<Author> {
    let response = try await api(id)
    return map.store(response.author, modifiedAt: response.updatedAt)
  }

  func authorRenamed(id: Int, name: String, at stamp: Stamp) {
    map.update(Author.self, id: id, modifiedAt: stamp) { $0.name = name }
  }
}

@Test func renamesReachTheScreenAndLateEventsAreRefused() async throws {
  let logger = RecordingLogger()
  let map = IdentityMap(logger: logger)
  let repository = AuthorRepository(map: map) { id in
    AuthorResponse(author: Author(id: id, name: "Ursula"), updatedAt: 100)
  }

  let author = try await repository.author(1)
  let screen = author.record(includingCurrentValue: true)

  repository.authorRenamed(id: 1, name: "Ursula K. Le Guin", at: 101)
  repository.authorRenamed(id: 1, name: "late", at: 99)
  #expect(screen.values.map(\.name) == ["Ursula", "Ursula K. Le Guin"])
  #expect(logger.staleWrites.count == 1)

  Task { repository.authorRenamed(id: 1, name: "Le Guin", at: 102) }
  let renamed = try await screen.first(timeout: .seconds(1)) { $0.name == "Le Guin" }
  #expect(renamed.name == "Le Guin")
}
