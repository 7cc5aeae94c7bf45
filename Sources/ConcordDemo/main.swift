// ConcordDemo: a reading app's networking client, backed by an IdentityMap, against a scripted
// server. `swift run ConcordDemo --help` for the options.

import Foundation

let usage = """
  usage: ConcordDemo [--db PATH] [--replay FILE] [--events N] [--seed S] [--no-widget]

    (no option)     play the scripted story: REST pages, then websocket events
    --db PATH       keep the client's map in the SQLite file PATH: a second run starts by
                    showing the feed cached there, before the scripted server answers
    --replay FILE   play the websocket events of FILE, a JSON Lines capture
                    (one event per line; see Examples/events.jsonl and the README)
    --events N      decode and apply N generated events, then print the throughput
    --seed S        the seed of the generated events (default 42)
    --no-widget     no widget: the second process that shows the book being read, from the
                    app's SQLite file (a temporary one without --db)
    --widget PATH   run as that widget, on the file PATH (the demo starts it)
  """

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("error: \(message)\n\n\(usage)\n".utf8))
  exit(2)
}

var replay: String?
var database: String?
var events: Int?
var seed: UInt64 = 42
var widget = true
var arguments = CommandLine.arguments.dropFirst()[...]
while let argument = arguments.popFirst() {
  func value() -> String {
    guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
    return value
  }
  switch argument {
  case "--replay": replay = value()
  case "--db": database = value()
  case "--events":
    guard let count = Int(value()), count > 0 else { fail("--events needs a positive integer") }
    events = count
  case "--seed":
    guard let parsed = UInt64(value()) else { fail("--seed needs a non-negative integer") }
    seed = parsed
  case "--no-widget": widget = false
  case "--widget": Widget.run(database: value())
  case "--help", "-h":
    print(usage)
    exit(0)
  default: fail("unknown argument \(argument)")
  }
}

do {
  if let events {
    try Throughput(events: events, seed: seed, console: .standardOutput).run()
  } else if let replay {
    guard let text = try? String(contentsOfFile: replay, encoding: .utf8) else {
      fail("cannot read \(replay)")
    }
    var demo = Demo(console: .standardOutput)
    demo.database = database
    demo.widget = widget
    demo.events = text
    demo.source = (replay as NSString).lastPathComponent
    demo.closeBookScreenBeforeLine = nil
    try await demo.run()
  } else {
    print("Concord demo: a reading app's client and a scripted server\n")
    var demo = Demo(console: .standardOutput)
    demo.database = database
    demo.widget = widget
    try await demo.run()
  }
} catch {
  FileHandle.standardError.write(Data("error: \(error)\n".utf8))
  exit(1)
}
