//! The bridges install as their READMEs say: from the repository as a Composer path
//! repository (offline: Packagist off, the framework's packages provided by the
//! app, as Debian's are here), their classes then found through Composer's
//! autoloader, the Laravel provider discovered from `extra.laravel`.

use std::path::Path;
use std::process::Command;

use crate::support::{assert_has, tools};

/// Each bridge: its entry class, the framework's autoloader (Debian's), and what the
/// app provides of the framework, at the version Debian ships.
struct Bridge {
    folder: &'static str,
    class: &'static str,
    framework: &'static str,
    provided: &'static [&'static str],
    version: &'static str,
}

const BRIDGES: &[Bridge] = &[
    Bridge {
        folder: "laravel",
        class: r"Tableq\Laravel\TableqServiceProvider",
        framework: "/usr/share/php/Illuminate/autoload.php",
        provided: &[
            "illuminate/console",
            "illuminate/queue",
            "illuminate/support",
        ],
        version: "8.83.26",
    },
    Bridge {
        folder: "symfony",
        class: r"Tableq\Symfony\TableqBundle",
        framework: "/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php",
        provided: &[
            "symfony/framework-bundle",
            "symfony/console",
            "symfony/messenger",
            "symfony/doctrine-messenger",
        ],
        version: "5.4.53",
    },
];

#[test]
fn each_bridge_installs_from_a_composer_path_repository() {
    let Some(composer) = tools::required(
        &["composer"],
        "apt-get install composer",
        "the bridges' Composer install",
    ) else {
        return;
    };
    for bridge in BRIDGES {
        let app = tempfile::tempdir().unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("bridges")
            .join(bridge.folder);
        let manifest = std::fs::read_to_string(source.join("composer.json")).unwrap();
        let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        let name = manifest["name"].as_str().unwrap();
        let provide: serde_json::Map<String, serde_json::Value> = bridge
            .provided
            .iter()
            .map(|p| (p.to_string(), bridge.version.into()))
            .collect();
        let project = serde_json::json!({
            "name": "tableq-test/app",
            "repositories": [{"type": "path", "url": source}, {"packagist.org": false}],
            "provide": provide,
            "require": {name: "@dev"},
            "config": {"allow-plugins": false},
        });
        std::fs::write(app.path().join("composer.json"), project.to_string()).unwrap();
        let installed = Command::new(&composer)
            .args(["install", "--no-interaction", "--no-progress"])
            .current_dir(app.path())
            .env("COMPOSER_HOME", app.path().join(".composer"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&installed.stderr);
        assert!(installed.status.success(), "{}: {said}", bridge.folder);
        let probe = format!(
            "require '{}'; require 'vendor/autoload.php'; echo class_exists('{}') ? 'found' : 'missing';",
            bridge.framework, bridge.class
        );
        let ran = Command::new("php")
            .args(["-r", &probe])
            .current_dir(app.path())
            .output()
            .unwrap();
        assert_has(&String::from_utf8_lossy(&ran.stdout), "found");
        if bridge.folder == "laravel" {
            // Discovered by Laravel's package manifest from the installed package's extra.
            let installed =
                std::fs::read_to_string(app.path().join("vendor/composer/installed.json")).unwrap();
            assert_has(&installed, r#""providers": ["#);
        }
    }
}
