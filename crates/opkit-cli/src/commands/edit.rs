//! `opkit edit`: changes the project's layout recorded in PROJECT (kubebuilder's `edit`);
//! today `--multigroup`.

use serde_json::json;

use super::{CliError, project_dir};
use crate::cli::EditArgs;
use crate::fileplan::FilePlan;
use crate::output::Output;
use crate::project::{self, Project};

/// Sets `multigroup` in PROJECT. Existing APIs stay where they are (as kubebuilder leaves
/// them); the command names them, so the user can move them by hand.
pub(super) fn edit(args: EditArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    let mut project = Project::load(&root)?;
    let Some(multigroup) = args.multigroup else {
        return Err(CliError::Usage("nothing to edit: pass --multigroup or --multigroup=false".into()));
    };
    // The APIs scaffolded by this project (built-in and external kinds have no code of theirs).
    let own: Vec<String> = project
        .resources
        .iter()
        .filter(|r| r.api.is_some())
        .map(|r| format!("{}/{}, Kind={}", r.full_group(), r.version, r.kind))
        .collect();
    let changed = project.multigroup != multigroup;
    project.multigroup = multigroup;
    let mut plan = FilePlan::new(&root);
    plan.write(project::FILE, project.render());
    let written = plan.commit()?;
    for w in &written {
        out.step(&format!("{} {}", w.action, w.path));
    }
    let layout = if multigroup {
        "New APIs go under src/api/<group>/<version>/ and their controllers under src/controller/<group>/."
    } else {
        "New APIs go under src/api/<group>_<version>/ and their controllers under src/controller/."
    };
    let mut text = format!("{} multigroup: {multigroup} in PROJECT. {layout}", if changed { "Set" } else { "Already" });
    if changed && !own.is_empty() {
        text.push_str(&format!(
            "\nExisting APIs are left where they are ({}); move them by hand if you want them in the new layout.",
            own.join("; ")
        ));
    }
    out.result(&text, json!({"multigroup": multigroup, "changed": changed, "existingApis": own, "files": written}));
    Ok(())
}
