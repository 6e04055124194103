import { familyBudget } from '../budget.js';

familyBudget('seams');
