import Foundation

/// A running `ConcordSharingHelper`: a second process with a store on a shared file, driven by
/// commands on its standard input, whose output lines the test waits for. Every wait has a
/// timeout, a hang guard only: the test waits for the line, never for a duration.
final class HelperProcess: @unchecked Sendable {
  // NB: @unchecked because `lines` and `ended` are only touched under `condition`.

  /// Where the helper is: built beside the test binary by `swift build --build-tests`.
  static let executable: URL? = {
    var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    if !FileManager.default.fileExists(atPath: directory.path) {
      directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    }
    // NB: beside the test binary on Linux; a few levels up from inside an .xctest bundle.
    for _ in 0..<5 {
      directory.deleteLastPathComponent()
      let candidate = directory.appendingPathComponent("ConcordSharingHelper")
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    return nil
  }()

  let process = Process()
  private let input = Pipe()
  private let output = Pipe()
  private let condition = NSCondition()
  private var lines: [String] = []
  private var partial = Data()
  private var ended = false
  /// Every line the helper printed, for failure messages.
  private(set) var transcript: [String] = []

  /// Starts the helper on the database at `path`, opened `mode` (`shared`, `readOnly` or
  /// `exclusive`), and waits until it says it is ready, or why it is not.
  init(_ path: String, _ mode: String) throws {
    guard let executable = Self.executable else {
      throw HelperError("ConcordSharingHelper is not built")
    }
    process.executableURL = executable
    process.arguments = [path, mode]
    process.standardInput = input
    process.standardOutput = output
    output.fileHandleForReading.readabilityHandler = { [weak self] handle in
      let data = handle.availableData
      self?.received(data)
    }
    try process.run()
  }

  deinit {
    output.fileHandleForReading.readabilityHandler = nil
    if process.isRunning { process.terminate() }
  }

  private func received(_ data: Data) {
    condition.lock()
    defer {
      condition.broadcast()
      condition.unlock()
    }
    guard !data.isEmpty else {
      ended = true
      return
    }
    partial.append(data)
    while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
      let line = String(decoding: partial[partial.startIndex..<newline], as: UTF8.self)
      partial.removeSubrange(partial.startIndex...newline)
      lines.append(line)
      transcript.append(line)
    }
  }

  /// Sends `command`, one line.
  func send(_ command: String) {
    input.fileHandleForWriting.write(Data((command + "\n").utf8))
  }

  /// Waits for the next line that starts with `prefix`, dropping the lines before it; throws
  /// when the helper ends first, or after `timeout`.
  @discardableResult
  func expect(_ prefix: String, timeout: TimeInterval = 60) throws -> String {
    try next(timeout: timeout) { $0.hasPrefix(prefix) }
  }

  /// Waits for the next line `matches` accepts, dropping the lines before it.
  func next(timeout: TimeInterval = 60, _ matches: (String) -> Bool) throws -> String {
    let deadline = Date(timeIntervalSinceNow: timeout)
    condition.lock()
    defer { condition.unlock() }
    while true {
      while !lines.isEmpty {
        let line = lines.removeFirst()
        if matches(line) { return line }
      }
      if ended {
        throw HelperError("the helper ended; it printed:\n" + transcript.joined(separator: "\n"))
      }
      guard condition.wait(until: deadline) else {
        throw HelperError(
          "timed out; the helper printed:\n" + transcript.suffix(20).joined(separator: "\n"))
      }
    }
  }

  /// Runs `command` and returns the lines it printed before its `ok`; throws its `error`.
  @discardableResult
  func run(_ command: String, timeout: TimeInterval = 60) throws -> [String] {
    send(command)
    let name = command.split(separator: " ").first.map(String.init) ?? command
    var printed: [String] = []
    let last = try next(timeout: timeout) { line in
      if line == "ok \(name)" || line.hasPrefix("error ") { return true }
      printed.append(line)
      return false
    }
    if last.hasPrefix("error ") { throw HelperError(last) }
    return printed
  }

  /// The line `get id` prints: `value ID TITLE VERSION`, or `value ID nil`.
  func value(_ id: String, timeout: TimeInterval = 60) throws -> String? {
    try run("get \(id)", timeout: timeout).last { $0.hasPrefix("value ") }
  }

  /// Asks the helper to quit, and waits until it has.
  func quit() throws {
    send("quit")
    try expect("ok quit")
    process.waitUntilExit()
  }
}

/// What went wrong with a helper process.
struct HelperError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
